__kernel void phase(__global const float *x, __global float *out)
{
    __local float cosv[16];
    int lid = get_local_id(0);
    float s = sincos(x[lid], &cosv[lid / 2]);
    barrier(CLK_LOCAL_MEM_FENCE);
    out[lid] = s + cosv[lid / 2];
}
