void put(__local float *p, int i, float v)
{
    p[i] = v;
}

float get(__local const float *p, int i)
{
    return p[i];
}

__kernel void helpers(__global float *out)
{
    __local float tile[64];
    int lid = get_local_id(0);
    put(tile, lid, lid * 2.0f);
    out[get_global_id(0)] = get(tile, (lid + 1) % 64);
}
