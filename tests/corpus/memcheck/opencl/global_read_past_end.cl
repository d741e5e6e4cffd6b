/* A 3-point average whose helper reads through its pointer argument: the last
   work-item reads in[n], one past the end of the buffer its pointer came from. */
static float right_of(__global const float *row, int i) {
    return row[i + 1];
}

__kernel void smooth(__global const float *in, __global float *out) {
    int i = get_global_id(0);
    out[i] = (in[i] + right_of(in, i)) * 0.5f;
}
