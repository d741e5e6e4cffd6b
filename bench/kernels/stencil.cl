__kernel void stencil(__global const float *in, __global float *out, uint w, uint h) {
    size_t x = get_global_id(0), y = get_global_id(1);
    if (x == 0 || y == 0 || x + 1 >= w || y + 1 >= h) {
        out[y * w + x] = in[y * w + x];
        return;
    }
    out[y * w + x] = 0.2f * (in[y * w + x] + in[y * w + x - 1] + in[y * w + x + 1] +
                             in[(y - 1) * w + x] + in[(y + 1) * w + x]);
}
