__kernel void accumulate(__global int *acc)
{
    acc[get_local_id(0)] += get_group_id(0) + 1;
}
