__kernel void std(__global int *out)
{
#if __OPENCL_C_VERSION__ >= 200
    out[0] = (int)get_global_id(0);
#else
    out[get_global_id(0)] = 1;
#endif
}
