__kernel void cube(__global int *out)
{
    __local int t[4][4][4];
    int x = get_local_id(0), y = get_local_id(1), z = get_local_id(2);
    t[z][y][x] = x + 4 * y + 16 * z;
    out[x + 4 * y + 16 * z] = t[z][y][(x + 1) % 4];
}
