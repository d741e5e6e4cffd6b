typedef struct {
    int key;
    float weight;
} Item;

__kernel void fields(__global Item *items)
{
    __local Item cache[32];
    int lid = get_local_id(0);
    if (lid % 2 == 0)
        cache[lid / 2].key = lid;
    else
        cache[lid / 2].weight = lid * 0.25f;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < 32)
        items[get_group_id(0) * 32 + lid] = cache[lid];
}
