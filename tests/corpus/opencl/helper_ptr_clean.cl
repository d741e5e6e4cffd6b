void put(__local float *p, int i, float v)
{
    p[i] = v;
}

float get(__local const float *p, int i)
{
    return p[i];
}

void put_global(__global float *p, int i, float v)
{
    p[i] = v;
}

__kernel void helpers(__global float *out)
{
    __local float tile[64];
    __local float twice[64];
    int lid = get_local_id(0);
    put(tile, lid, lid * 2.0f);
    put(twice, lid, lid * 4.0f);
    barrier(CLK_LOCAL_MEM_FENCE);
    float v = get(tile, (lid + 1) % 64) + get(twice, 63 - lid);
    put_global(out, get_global_id(0), v);
}
