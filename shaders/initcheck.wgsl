// initcheck (docs/memcheck.md): the written-shadows of the variables checked for
// uninitialised reads, one bit per byte in the control words from the word
// _gr_par[_GR_CTL_WRITTEN + var] on (a workgroup variable: one bitmap per group).
// Appended to a module only when it has a checked variable.

// bits [lo, hi) of a shadow word (lo < hi <= 32)
fn _gr_wmask(lo: u32, hi: u32) -> u32 {
  if hi - lo >= 32u {
    return 0xffffffffu;
  }
  return ((1u << (hi - lo)) - 1u) << lo;
}

// a write of the `n` bytes at byte `off`: they are written from now on
fn _gr_wset(base: u32, off: u32, n: u32) {
  var b = off;
  let e = off + n;
  loop {
    if b >= e {
      break;
    }
    let w = b >> 5u;
    let m = _gr_wmask(b & 31u, min(e - (w << 5u), 32u));
    if (atomicLoad(&_gr_ctl[base + w]) & m) != m {
      atomicOr(&_gr_ctl[base + w], m);
    }
    b = (w + 1u) << 5u;
  }
}

// a read of the `n` bytes at byte `off`: one whose bytes are not all written is
// counted in the uninitialised-read area and, while it has room, recorded there with
// its first unwritten byte (the read itself is made: its value is what memory holds)
fn _gr_wread(site: u32, flags: u32, base: u32, off: u32, n: u32, size: u32) {
  var b = off;
  let e = off + n;
  loop {
    if b >= e {
      break;
    }
    let w = b >> 5u;
    let miss = _gr_wmask(b & 31u, min(e - (w << 5u), 32u)) & ~atomicLoad(&_gr_ctl[base + w]);
    if miss != 0u {
      let i = atomicAdd(&_gr_ctl[_GR_CTL_UNINIT], 1u);
      if i < _GR_UNINIT_SLOTS {
        let r = _GR_CTL_UNINIT + 1u + i * _GR_RECORD_WORDS;
        atomicStore(&_gr_ctl[r + _GR_W_SITE], site);
        atomicStore(&_gr_ctl[r + _GR_W_FLAGS], flags);
        atomicStore(&_gr_ctl[r + _GR_OOB_INDEX], (w << 5u) + firstTrailingBit(miss));
        atomicStore(&_gr_ctl[r + _GR_W_LID], _gr_lid);
        atomicStore(&_gr_ctl[r + _GR_W_GROUP], _gr_grp);
        atomicStore(&_gr_ctl[r + _GR_OOB_DEPTH], 0u);
        atomicStore(&_gr_ctl[r + _GR_OOB_BOUND], size);
        atomicStore(&_gr_ctl[r + _GR_OOB_UNIT], _GR_OOB_BYTES);
      }
      return;
    }
    b = (w + 1u) << 5u;
  }
}
