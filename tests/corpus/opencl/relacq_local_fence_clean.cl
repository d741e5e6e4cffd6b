// Message passing through __local memory with relaxed flag accesses and fences.
__kernel void localfence(__global int *out)
{
    __local int msg;
    __local atomic_int flag;
    int t = get_local_id(0);
    if (t == 0)
        atomic_store_explicit(&flag, 0, memory_order_relaxed, memory_scope_work_group);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (t == 0) {
        msg = 42 + get_group_id(0);
        atomic_work_item_fence(CLK_LOCAL_MEM_FENCE, memory_order_release, memory_scope_work_group);
        atomic_store_explicit(&flag, 1, memory_order_relaxed, memory_scope_work_group);
    } else if (t == 1) {
        while (atomic_load_explicit(&flag, memory_order_relaxed, memory_scope_work_group) != 1)
            ;
        atomic_work_item_fence(CLK_LOCAL_MEM_FENCE, memory_order_acquire, memory_scope_work_group);
        out[get_group_id(0)] = msg;
    }
}
