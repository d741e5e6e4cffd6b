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

// a write of the `n` bytes at byte `off`: they are written from now on. Per shadow
// word it spans (the first; further ones only for a leaf that crosses a 32-byte
// boundary, so the common case's loop ends at its first test): one load, and an
// atomicOr only while its bits are not all set (the first write of those bytes).
fn _gr_wset(base: u32, off: u32, n: u32) {
  let e = off + n;
  var w = off >> 5u;
  var m = _gr_wmask(off & 31u, min(e - (w << 5u), 32u));
  loop {
    if (atomicLoad(&_gr_ctl[base + w]) & m) != m {
      atomicOr(&_gr_ctl[base + w], m);
    }
    w += 1u;
    if (w << 5u) >= e {
      break;
    }
    m = _gr_wmask(0u, min(e - (w << 5u), 32u));
  }
}

// a read of the `n` bytes at byte `off`: one whose bytes are not all written is
// counted in the uninitialised-read area and, while it has room, recorded there with
// its first unwritten byte (the read itself is made: its value is what memory holds).
// Per shadow word it spans, up to the first with an unwritten byte: one load and a
// compare; the record's code is reached from one place only.
fn _gr_wread(site: u32, flags: u32, base: u32, off: u32, n: u32, size: u32) {
  let e = off + n;
  var w = off >> 5u;
  var miss = _gr_wmask(off & 31u, min(e - (w << 5u), 32u)) & ~atomicLoad(&_gr_ctl[base + w]);
  loop {
    if miss != 0u || ((w + 1u) << 5u) >= e {
      break;
    }
    w += 1u;
    miss = _gr_wmask(0u, min(e - (w << 5u), 32u)) & ~atomicLoad(&_gr_ctl[base + w]);
  }
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
  }
}
