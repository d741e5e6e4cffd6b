__kernel void fenced(__global int *msg, __global atomic_int *flag, __global int *out)
{
    int me = get_group_id(0), other = 1 - me;
    msg[me] = 40 + me;
    atomic_work_item_fence(CLK_GLOBAL_MEM_FENCE, memory_order_release, memory_scope_device);
    atomic_store_explicit(&flag[me], 1, memory_order_relaxed, memory_scope_device);
    if (atomic_load_explicit(&flag[other], memory_order_relaxed, memory_scope_device) == 1) {
        atomic_work_item_fence(CLK_GLOBAL_MEM_FENCE, memory_order_acquire, memory_scope_device);
        out[me] = msg[other];
    }
}
