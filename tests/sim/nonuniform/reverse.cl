/* Reverse each work-group's part through local memory: a barrier in every group,
   the partial one too, and each work-item reads its mirror within its own group. */
__kernel void reverse(__global const int *in, __global int *out, __local int *tile)
{
    size_t l = get_local_id(0), n = get_local_size(0), g = get_global_id(0);
    tile[l] = in[g];
    barrier(CLK_LOCAL_MEM_FENCE);
    out[g] = tile[n - 1 - l];
}
