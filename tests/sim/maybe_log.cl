__kernel void maybe_log(__global int *data, __global int *log)
{
    int i = get_global_id(0);
    data[i] += 1;
    if (log != 0)
        log[0] = i;
}
