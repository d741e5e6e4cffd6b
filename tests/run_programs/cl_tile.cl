// Neighbour sums through __local memory; without -DFIXED the barrier is missing.
__kernel void pairs(__global const uint *inp, __global uint *out, __local uint *tile)
{
    size_t lid = get_local_id(0);
    tile[lid] = inp[get_global_id(0)];
#ifdef FIXED
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    out[get_global_id(0)] = tile[lid] + tile[(lid + 1) % get_local_size(0)];
}
