__kernel void count(__global int *counter, __global int *out)
{
    atomic_add(&counter[0], 1);
    if (get_local_id(0) == 0)
        out[0] = counter[0];
}
