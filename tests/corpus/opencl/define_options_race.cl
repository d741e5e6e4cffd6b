#define STRIDE 1
#define AT(i) tile[(i) % TILE]
#ifndef TILE
#error "build with -DTILE=N"
#endif

__kernel void scaled(__global int *out)
{
    __local int tile[TILE];
    int lid = get_local_id(0);
    tile[lid] = lid * SCALE;
    out[lid] = AT(lid + STRIDE);
}
