__kernel void claim_or_reset(__global int *flag, __global int *seen)
{
    int lid = get_local_id(0);
    int old = atomic_cmpxchg(&flag[0], 0, lid + 10);
    if (lid == 7)
        flag[0] = 6;
    seen[lid] = old;
}
