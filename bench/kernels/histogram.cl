__kernel void histogram(__global const uint *data, __global uint *bins) {
    uint v = data[get_global_id(0)];
    atomic_inc(&bins[v & 255u]);
}
