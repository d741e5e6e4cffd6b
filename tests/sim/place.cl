typedef struct { int stride; int offset; } layout_t;

__kernel void place(__global int *out, layout_t lay)
{
    out[get_global_id(0) * lay.stride + lay.offset] = (int)get_global_id(0);
}
