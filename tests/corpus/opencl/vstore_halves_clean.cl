__kernel void halves(__global float *out)
{
    __local float tile[128];
    int lid = get_local_id(0);
    vstore2((float2)(lid, -lid), lid, tile);
    barrier(CLK_LOCAL_MEM_FENCE);
    float4 q = vload4(lid / 2, tile);
    vstore2(q.lo + q.hi, get_global_id(0), out);
}
