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

// A shadow is its bitmap, then its fill count (gpurace/abi.py: written_stride): the
// bits set so far. `full`, the variable's size in bytes when the shader knows it (a
// workgroup variable; 0 for a storage buffer, whose count stays 0), is the count at
// which every byte is written; the invocation's private flag (initcheck.py) then
// skips the variable's tests and sets for the rest of the invocation (bits are never
// cleared, so every later test would pass and every later set would find its bits
// set). The flag is set by the write that completes the fill (`_gr_wset`'s result)
// and after each workgroup barrier (`_gr_wfilled`), not by a test at each read:
// lavapipe runs every statement of a shader, taken or not, under a mask, and each
// atomic lane by lane, so what an access costs there is the atomics in its code.

// a write of the `n` bytes at byte `off`: they are written from now on. Per shadow
// word it spans (the first; further ones only for a leaf that crosses a 32-byte
// boundary, so the common case's loop ends at its first): an atomicOr, whose old
// value says which bits it set first, and only those are added to the fill count.
// No load tests the bits first: on lavapipe the load would cost as much as the OR.
fn _gr_wset(base: u32, off: u32, n: u32, full: u32) -> bool {
  let e = off + n;
  var w = off >> 5u;
  var m = _gr_wmask(off & 31u, min(e - (w << 5u), 32u));
  var done = false;
  loop {
    let fresh = countOneBits(m & ~atomicOr(&_gr_ctl[base + w], m));
    if full != 0u && fresh != 0u
        && atomicAdd(&_gr_ctl[base + (full + 31u) / 32u], fresh) + fresh == full {
      done = true;
    }
    w += 1u;
    if (w << 5u) >= e {
      break;
    }
    m = _gr_wmask(0u, min(e - (w << 5u), 32u));
  }
  return done;
}

// whether every byte of the workgroup variable of `size` bytes whose (group's) shadow
// is at `base` is written: its fill count reached the size (called after a barrier).
fn _gr_wfilled(base: u32, size: u32) -> bool {
  return atomicLoad(&_gr_ctl[base + (size + 31u) / 32u]) == size;
}

// a read of the `n` bytes at byte `off`: its first unwritten byte, or 0xffffffff
// when its bytes are all written (the read itself is made: its value is what memory
// holds). Per shadow word it spans, up to the first with an unwritten byte: one load
// and a compare (one load in the code). The caller counts a miss in private
// variables and _gr_urec records it where the invocation exits
// (gpurace/instrument/wgsl/initcheck.py).
fn _gr_wread(base: u32, off: u32, n: u32) -> u32 {
  let e = off + n;
  var w = off >> 5u;
  var lo = off & 31u;
  var at = 0xffffffffu;
  loop {
    let miss = _gr_wmask(lo, min(e - (w << 5u), 32u)) & ~atomicLoad(&_gr_ctl[base + w]);
    if miss != 0u {
      at = (w << 5u) + firstTrailingBit(miss);
      break;
    }
    w += 1u;
    lo = 0u;
    if (w << 5u) >= e {
      break;
    }
  }
  return at;
}

// `count` reads of this invocation at `site` (the record's `flags`: kind, space, size,
// variable) found an unwritten byte, the least of them `byte`: all are counted in the
// uninitialised-read area and, while it has room, recorded there.
fn _gr_urec(site: u32, flags: u32, count: u32, byte: u32, size: u32) {
  let i = atomicAdd(&_gr_ctl[_GR_CTL_UNINIT], count);
  for (var j = i; j < min(i + count, _GR_UNINIT_SLOTS); j++) {
    _gr_area_slot(_GR_CTL_UNINIT + 1u + j * _GR_RECORD_WORDS, site, flags, byte, 0u, size,
                  _GR_OOB_BYTES);
  }
}
