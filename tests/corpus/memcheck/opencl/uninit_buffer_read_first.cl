/* An accumulator the launch leaves uninitialised: each work-item reads its entry
   before it stores the first value there (the second read is of its own write). */
__kernel void accumulate(__global const float *src, __global float *acc) {
    size_t i = get_global_id(0);
    float before = acc[i];
    acc[i] = src[i];
    acc[i] += before;
}
