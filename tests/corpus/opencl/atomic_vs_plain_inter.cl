__kernel void reset_and_count(__global uint *counter)
{
    if (get_group_id(0) == 0) {
        if (get_local_id(0) == 0)
            counter[0] = 100u;
    } else {
        atomic_inc(&counter[0]);
    }
}
