#pragma OPENCL EXTENSION cl_khr_global_int32_base_atomics : enable
#pragma OPENCL EXTENSION cl_khr_global_int32_extended_atomics : enable

__kernel void stats(__global const int *in, __global int *acc)
{
    int v = in[get_global_id(0)];
    atomic_add(&acc[0], v);
    atomic_max(&acc[1], v);
    atomic_min(&acc[2], v);
    atom_add(&acc[3], 1);
    atom_or(&acc[4], 1 << (v % 31));
    atomic_xchg(&acc[5], 5);  /* one value: the last exchange is no work-item's in particular */
    atomic_cmpxchg(&acc[6], 0, 6);  /* likewise for the first compare-exchange to succeed */
}
