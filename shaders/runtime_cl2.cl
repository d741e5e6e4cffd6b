/* gpurace: OpenCL C 2.0's work_group_barrier, logged like barrier() in runtime.cl;
   added to a program only when it calls work_group_barrier (OpenCL C 1.2 has none). */
void _gr_wg_barrier(cl_mem_fence_flags f, __private _gr_state_t *s, uint site) {
  uint x = _gr_arrive(f, s, site);
  work_group_barrier(f);
  _gr_passed(s, x);
}

void _gr_wg_barrier_scope(cl_mem_fence_flags f, memory_scope sc, __private _gr_state_t *s, uint site) {
  uint x = _gr_arrive(f, s, site);
  work_group_barrier(f, sc);
  _gr_passed(s, x);
}
