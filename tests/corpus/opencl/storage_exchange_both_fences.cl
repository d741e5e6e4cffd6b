__kernel void red_black(__global float *u)
{
    int i = 2 * get_local_id(0) + 1;
    for (int sweep = 0; sweep < 2; sweep++) {
        u[i] = 0.5f * (u[i - 1] + u[i + 1]);
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
        u[i + 1] = 0.5f * (u[i] + u[i + 2]);
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    }
}
