/* Only the even work-items fill their entry of a __local tile passed by the host;
   every work-item then reads its partner's (lid ^ 1): the even ones read an odd
   entry no one wrote. */
__kernel void pairs(__global uint *out, __local uint *tile) {
    uint lid = get_local_id(0);
    if (lid % 2 == 0)
        tile[lid] = get_global_id(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    out[get_global_id(0)] = tile[lid ^ 1];
}
