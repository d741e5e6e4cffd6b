// Decoupled look-back scan: each work-group scans its tile in __local memory, then its
// work-item 0 publishes the tile's aggregate (flag 1), walks back over the earlier
// tiles' flags, adding aggregates until it meets an inclusive prefix (flag 2), and
// publishes its own inclusive prefix. Tiles are numbered by a ticket, so every tile a
// group waits for belongs to a group that has already started.
void publish(__global int *val, __global atomic_int *flag, int tile, int kind, int v)
{
    val[2 * tile + kind - 1] = v; // kind 1: the aggregate, kind 2: the inclusive prefix
    atomic_store_explicit(&flag[tile], kind, memory_order_release, memory_scope_device);
}

__kernel void lookback(__global const int *in, __global atomic_int *ticket, __global int *val,
                       __global atomic_int *flag, __global int *out)
{
    __local int scan[32], tile, base;
    int t = get_local_id(0), n = get_local_size(0);
    if (t == 0)
        tile = atomic_fetch_add_explicit(ticket, 1, memory_order_relaxed, memory_scope_device);
    barrier(CLK_LOCAL_MEM_FENCE);
    int i = tile * n + t;
    scan[t] = in[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int d = 1; d < n; d *= 2) {
        int add = t >= d ? scan[t - d] : 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        scan[t] += add;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0) {
        int total = scan[n - 1], prefix = 0, s = 0;
        publish(val, flag, tile, 1, total);
        for (int j = tile - 1; j >= 0 && s != 2; j--) {
            while ((s = atomic_load_explicit(&flag[j], memory_order_acquire,
                                             memory_scope_device)) == 0)
                ;
            prefix += val[2 * j + s - 1];
        }
        publish(val, flag, tile, 2, prefix + total);
        base = prefix;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    out[i] = base + scan[t];
}
