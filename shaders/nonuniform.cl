/* gpurace: non-uniform work-groups on a driver that runs only uniform ones
   (gpurace/launch/ndrange.py). The launch is split into uniform sub-launches with a
   global_work_offset; there get_global_id, get_local_id, get_local_size and
   get_local_linear_id are right natively, and these built-ins, which depend on the
   whole NDRange, are redefined from the real global size (_GR_NU_G0..2) and the
   enqueued work-group size (_GR_NU_L0..2) given as -D build options. Placed before
   the runtime (shaders/runtime.cl) and the user's code, so both see them. A check's
   launch has no global_work_offset of its own: get_global_offset is 0. */
size_t _gr_nu_pick(uint d, size_t x, size_t y, size_t z, size_t other) {
  return d == 0u ? x : d == 1u ? y : d == 2u ? z : other;
}
size_t _gr_nu_enqueued(uint d) { return _gr_nu_pick(d, _GR_NU_L0, _GR_NU_L1, _GR_NU_L2, 1); }
size_t _gr_nu_global_size(uint d) { return _gr_nu_pick(d, _GR_NU_G0, _GR_NU_G1, _GR_NU_G2, 1); }
size_t _gr_nu_num_groups(uint d) {
  return (_gr_nu_global_size(d) + _gr_nu_enqueued(d) - 1) / _gr_nu_enqueued(d);
}
/* get_global_id is 0 for d > 2, so the group id is 0 there, as OpenCL defines */
size_t _gr_nu_group_id(uint d) { return get_global_id(d) / _gr_nu_enqueued(d); }
size_t _gr_nu_global_linear_id(void) {
  return get_global_id(0) + _GR_NU_G0 * (get_global_id(1) + _GR_NU_G1 * get_global_id(2));
}
#define get_group_id(d) _gr_nu_group_id(d)
#define get_num_groups(d) _gr_nu_num_groups(d)
#define get_global_size(d) _gr_nu_global_size(d)
#define get_enqueued_local_size(d) _gr_nu_enqueued(d)
#define get_global_offset(d) ((size_t)0)
#define get_global_linear_id() _gr_nu_global_linear_id()
/* the runtime numbers work-items in the enqueued shape (shaders/runtime.cl) */
#define _GR_ENQUEUED_SIZE(d) _gr_nu_enqueued(d)
