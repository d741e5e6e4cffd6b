/* Local memory written by an async copy (tile) and by a builtin's output pointer
   (whole) is initialised; a __local counter that no one stores before atomic_inc
   is not: the first atomic of each group reads it unwritten. */
__kernel void k(__global const float *src, __global float *out, __global int *counts) {
    __local float tile[32];
    __local float whole[32];
    __local int hits;
    event_t e = async_work_group_copy(tile, src + get_group_id(0) * 32, 32, 0);
    wait_group_events(1, &e);
    uint lid = get_local_id(0);
    float f = fract(tile[lid] * 0.5f, &whole[lid]);
    atomic_inc(&hits);
    barrier(CLK_LOCAL_MEM_FENCE);
    out[get_global_id(0)] = f + whole[lid];
    if (lid == 0)
        counts[get_group_id(0)] = hits;
}
