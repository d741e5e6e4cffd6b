global int hits = 0;
global float table[64];

__kernel void fill(__global float *out)
{
    int gid = get_global_id(0);
    table[gid] = gid * 0.5f;
    out[gid] = table[(gid + 1) % 64];
    if (gid == 0)
        hits = 1;
}
