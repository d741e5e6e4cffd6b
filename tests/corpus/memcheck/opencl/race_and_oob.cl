/* Every work-item adds its value into partial[gid / 2] without atomics (a race
   between the two work-items of each pair), and the last pair's slot is one past
   the end of partial, which holds n / 2 - 1 elements. */
__kernel void pairs(__global const float *in, __global float *partial) {
    int gid = get_global_id(0);
    partial[gid / 2] += in[gid];
}
