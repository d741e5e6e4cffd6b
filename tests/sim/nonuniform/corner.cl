__kernel void corner(__global int *flag)
{
    if (get_group_id(0) == 1 && get_group_id(1) == 1 && get_local_id(1) == 1)
        flag[0] = (int)get_local_id(0);
}
