typedef struct {
    int count;
    float mean;
} Stat;

__kernel void stats(__global Stat *stats)
{
    __global Stat *p = &stats[get_local_id(0) / 2];
    p->count = get_local_id(0);
    if (get_local_id(0) % 2 == 0)
        p->mean = 0.5f;
}
