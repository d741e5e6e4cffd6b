__kernel void flag(__global int *out)
{
    __local int seen;
    seen = 1;
    barrier(CLK_LOCAL_MEM_FENCE);
    out[get_global_id(0)] = seen;
}
