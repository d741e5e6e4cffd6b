__kernel __attribute__((reqd_work_group_size(32, 1, 1)))
void rev(__global int *data, __local int *tmp)
{
    int lid = get_local_id(0);
    tmp[lid] = data[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    data[get_global_id(0)] = tmp[31 - lid];
}
