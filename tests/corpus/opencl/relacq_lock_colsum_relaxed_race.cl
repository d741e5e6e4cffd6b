// Per-column spin lock: work-item c of each of 64 work-groups adds its group's partial
// sum of column c into sums[c] under lock[c]: 64 takers of each of 4 lock words.
__kernel void colsum(__global const int *x, __global atomic_int *lock, __global int *sums)
{
    int c = get_local_id(0), part = 0;
    for (int r = 0; r < 2; r++)
        part += x[(get_group_id(0) * 2 + r) * get_local_size(0) + c];
    int free = 0;
    while (!atomic_compare_exchange_strong_explicit(&lock[c], &free, 1, memory_order_acquire,
                                                    memory_order_relaxed, memory_scope_device))
        free = 0;
    sums[c] += part;
    atomic_store_explicit(&lock[c], 0, memory_order_relaxed, memory_scope_device);
}
