__kernel void lanes(__global float4 *out)
{
    __local float4 v[16];
    int lid = get_local_id(0);
    float x = lid + 1.0f;
    switch (lid % 4) {
    case 0: v[lid / 4].x = x; break;
    case 1: v[lid / 4].y = x; break;
    case 2: v[lid / 4].z = x; break;
    default: v[lid / 4].w = x; break;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < 16)
        out[get_group_id(0) * 16 + lid] = v[lid];
}
