__kernel void pairs(__global float *out)
{
    __local float tile[132];
    int lid = get_local_id(0);
    vstore2((float2)(lid, lid + 0.5f), lid, tile);
    float4 q = vload4(0, tile + 2 * lid);
    vstore4(q, get_global_id(0), out);
}
