// Work-item 0 waits for a flag that no work-item ever sets: the loop never ends.
__kernel void spin(__global volatile int *flag, __global int *out) {
    int id = get_global_id(0);
    int n = 0;
    if (id == 0) {
        while (flag[0] == 0) {
            n = n + 1;
        }
    }
    out[id] = n;
}
