/* Each work-item writes what OpenCL 2.0 defines for it in a non-uniform NDRange. */
__kernel void ids(__global uint *out)
{
    size_t i = get_global_linear_id();
    for (uint d = 0; d < 3; d++) {
        __global uint *o = out + 24 * i + 8 * d;
        o[0] = (uint)get_group_id(d);
        o[1] = (uint)get_local_id(d);
        o[2] = (uint)get_local_size(d);
        o[3] = (uint)get_enqueued_local_size(d);
        o[4] = (uint)get_num_groups(d);
        o[5] = (uint)get_global_size(d);
        o[6] = (uint)get_global_offset(d);
        o[7] = (uint)get_local_linear_id();
    }
}
