__kernel void status(__global int *status)
{
    status[0] = 7;
}
