__kernel void try_claim(__global int *flag, __global int *seen)
{
    int lid = get_local_id(0);
    int old = atomic_cmpxchg(&flag[0], 0, lid + 10);
    if (lid == 0)
        seen[0] = flag[0];
    seen[lid + 1] = old;
}
