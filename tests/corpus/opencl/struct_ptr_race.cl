typedef struct {
    int count;
    int total;
} Tally;

__kernel void tally(__global int *out)
{
    __local Tally s;
    __local Tally *p = &s;
    int lid = get_local_id(0);
    if (lid == 0)
        p->total = 0;
    if (lid < 8)
        p->count = lid;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0)
        out[0] = p->count + p->total;
}
