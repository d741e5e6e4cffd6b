"""PTX text that the rewriter inserts: the record appenders and per-site code.

Every inserted piece is wrapped in ``/*<gr*/ ... /*gr>*/`` so that removing the
marked spans gives back the original PTX byte for byte (the tests check this).
"""

from __future__ import annotations

# event slots per group in the control buffer: the OpenCL runtime's scheme (internals §5)
from gpurace.backends.prefilter import SHADOW_HEAD
from gpurace.instrument.opencl.runtime import EVENT_SLOTS

OPEN, CLOSE = "/*<gr*/", "/*gr>*/"
FNV_OFFSET, FNV_PRIME = 2166136261, 16777619
# sync-event log (third parameter `_gr_sync`): [0] records requested, [1] capacity,
# records of RECORD_WORDS words from word SYNC_HEAD on
SYNC_HEAD = 8
SCRATCH32, SCRATCH64, SCRATCH_PRED = 24, 4, 4


def wrap(text: str) -> str:
    return f"{OPEN}\n{text}\n{CLOSE}"


def rec_function(nvars: int) -> str:
    """``_gr_rec``: append one record to the log, honouring the control words.

    The control buffer is docs/internals.md §5's: [0] requested, [1] capacity, [2]/[3]
    the linear address range [lo, hi), [4]/[5] histogram bins and width (a counting
    run when bins > 0), [6 + v] each variable's linear base, [6 + NV + v] its size,
    [6 + 2 NV] unattributed accesses, [7 + 2 NV + bin] the bins, then E (groups with
    event slots) and EVENT_SLOTS words per group. An access is kept if a 4-byte word it
    touches lies in [lo, hi); an event if its group does and no work-item of the group
    with a lower-or-equal `lid` claimed its slot with the same (ordinal, site) (the
    OpenCL runtime's `_gr_ev_new`: the analysis needs only the lowest of each). The
    prefilter's shadow `_gr_shd` (its header's mode: 0 off, 1 build, 2 filter) decides
    which accesses are logged: LOCAL_PTX for shared words of the block's local area
    (`_gr_lw0`: the variable's first word there), else SHADOW_PTX.
    """
    bins = 4 * (7 + 2 * nvars)
    evg, evs = bins, bins + 4  # E and the first slot, after the `nbins` bins
    text = f"""\
.func _gr_rec(.param .b64 _gr_log, .param .b64 _gr_ctl, .param .b64 _gr_shd, .param .b32 _gr_site,
  .param .b32 _gr_flags, .param .b32 _gr_off, .param .b32 _gr_lid, .param .b32 _gr_grp,
  .param .b32 _gr_epoch, .param .b32 _gr_value, .param .b32 _gr_extra, .param .b32 _gr_lw0)
{{
  .reg .pred %p<8>;
  .reg .b32 %r<64>;
  .reg .b64 %rd<12>;
  ld.param.u64 %rd1, [_gr_log];
  ld.param.u64 %rd2, [_gr_ctl];
  ld.param.u64 %rd8, [_gr_shd];
  ld.param.u32 %r1, [_gr_site];
  ld.param.u32 %r2, [_gr_flags];
  ld.param.u32 %r3, [_gr_off];
  ld.param.u32 %r4, [_gr_lid];
  ld.param.u32 %r5, [_gr_grp];
  ld.param.u32 %r6, [_gr_epoch];
  ld.param.u32 %r7, [_gr_value];
  ld.param.u32 %r8, [_gr_extra];
  ld.param.u32 %r46, [_gr_lw0];
  ld.global.u32 %r9, [%rd2+8];
  ld.global.u32 %r10, [%rd2+12];
  mov.u32 %r12, %r5;
  and.b32 %r11, %r2, 3;
  setp.eq.u32 %p1, %r11, 3;
  @%p1 bra $_gr_event;
  shr.u32 %r13, %r2, 16;
  and.b32 %r13, %r13, 255;
  mul.wide.u32 %rd3, %r13, 4;
  add.s64 %rd3, %rd2, %rd3;
  ld.global.u32 %r14, [%rd3+24];
  and.b32 %r15, %r3, -4;
  add.s32 %r15, %r14, %r15;
  shr.u32 %r16, %r2, 8;
  and.b32 %r16, %r16, 255;
  add.s32 %r17, %r3, %r16;
  add.s32 %r17, %r17, -1;
  and.b32 %r17, %r17, -4;
  add.s32 %r17, %r14, %r17;
  setp.lt.u32 %p2, %r15, %r10;
  setp.ge.and.u32 %p2, %r17, %r9, %p2;
  max.u32 %r12, %r15, %r9;
  ld.global.u32 %r32, [%rd8];
  setp.eq.u32 %p3, %r32, 0;
  @%p3 bra $_gr_keep;
  setp.eq.u32 %p3, %r32, 1;
{{LOCAL}}
  or.pred %p1, %p2, %p3;
  @!%p1 bra $_gr_keep;
{{SHADOW}}
  bra.uni $_gr_keep;
$_gr_event:
  setp.ge.u32 %p2, %r5, %r9;
  setp.lt.and.u32 %p2, %r5, %r10, %p2;
  @!%p2 bra $_gr_done;
  shr.u32 %r24, %r2, 24;
  and.b32 %r24, %r24, 15;
  setp.ge.u32 %p3, %r24, {EVENT_SLOTS // 4};
  setp.ge.or.u32 %p3, %r6, 255, %p3;
  setp.ge.or.u32 %p3, %r1, 4096, %p3;
  setp.ge.or.u32 %p3, %r4, 4096, %p3;
  @%p3 bra $_gr_keep;
  ld.global.u32 %r25, [%rd2+16];
  mul.wide.u32 %rd6, %r25, 4;
  add.s64 %rd6, %rd2, %rd6;
  ld.global.u32 %r26, [%rd6+{evg}];
  setp.ge.u32 %p3, %r5, %r26;
  @%p3 bra $_gr_keep;
  mad.lo.u32 %r27, %r5, {EVENT_SLOTS // 4}, %r24;
  and.b32 %r28, %r6, 3;
  mad.lo.u32 %r27, %r27, 4, %r28;
  mul.wide.u32 %rd7, %r27, 4;
  add.s64 %rd6, %rd6, %rd7;
  add.s32 %r28, %r6, 1;
  shl.b32 %r28, %r28, 24;
  shl.b32 %r29, %r1, 12;
  or.b32 %r28, %r28, %r29;
  or.b32 %r28, %r28, %r4;
  shr.u32 %r29, %r28, 12;
  ld.volatile.global.u32 %r30, [%rd6+{evs}];
$_gr_claim:
  shr.u32 %r31, %r30, 12;
  setp.eq.u32 %p3, %r31, %r29;
  and.b32 %r31, %r30, 4095;
  setp.le.and.u32 %p3, %r31, %r4, %p3;
  @%p3 bra $_gr_done;
  atom.global.cas.b32 %r31, [%rd6+{evs}], %r30, %r28;
  setp.eq.u32 %p3, %r31, %r30;
  mov.u32 %r30, %r31;
  @!%p3 bra $_gr_claim;
$_gr_keep:
  @!%p2 bra $_gr_done;
  ld.global.u32 %r18, [%rd2+16];
  setp.eq.u32 %p3, %r18, 0;
  @%p3 bra $_gr_append;
  ld.global.u32 %r19, [%rd2+20];
  max.u32 %r19, %r19, 1;
  sub.s32 %r20, %r12, %r9;
  div.u32 %r20, %r20, %r19;
  add.s32 %r21, %r18, -1;
  min.u32 %r20, %r20, %r21;
  mul.wide.u32 %rd4, %r20, 4;
  add.s64 %rd4, %rd2, %rd4;
  red.global.add.u32 [%rd4+{bins}], 1;
  bra.uni $_gr_done;
$_gr_append:
  atom.global.add.u32 %r22, [%rd2], 1;
  ld.global.u32 %r23, [%rd2+4];
  setp.ge.u32 %p3, %r22, %r23;
  @%p3 bra $_gr_done;
  mul.wide.u32 %rd5, %r22, 32;
  add.s64 %rd5, %rd1, %rd5;
  st.global.v4.u32 [%rd5], {{%r1, %r2, %r3, %r4}};
  st.global.v4.u32 [%rd5+16], {{%r5, %r6, %r7, %r8}};
$_gr_done:
  ret;
}}
"""
    return text.replace("{SHADOW}", SHADOW_PTX).replace("{LOCAL}", LOCAL_PTX)


# The launch-wide shadow of backends/prefilter.py (docs/internals.md §7), for an
# access whose word addresses are [%r15, %r17] (lid %r4, group %r5, flags %r2) in a
# build (%p3, mode 1) or filter (mode 2) run; leaves in %p2 whether it is logged.
# The OpenCL runtime's `_gr_shadow` in PTX: a build run marks each word's (actor,
# kinds) and sets [3] for a word beyond the shadow; a filter run keeps an access with
# a word that may conflict (several actors and a store, or an atomic beside plain
# accesses) or lies beyond the shadow, and counts in [3] the accesses whose actor or
# kind a word's pair lacks (`unseen`: the host then repeats the run unfiltered).
SHADOW_PTX = f"""\
  ld.global.u32 %r33, [%rd8+4];
  ld.global.u32 %r34, [%rd8+8];
  and.b32 %r35, %r2, 3;
  mov.u32 %r45, 1;
  shl.b32 %r35, %r45, %r35;
  mad.lo.u32 %r36, %r5, %r34, %r4;
  and.b32 %r37, %r2, 4;
  setp.ne.u32 %p4, %r37, 0;
  @%p4 mov.u32 %r36, %r4;
  add.u32 %r36, %r36, 1;
  mov.u32 %r38, 0;
  mov.u32 %r39, 0;
  shr.u32 %r40, %r15, 2;
  shr.u32 %r41, %r17, 2;
$_gr_sloop:
  setp.gt.u32 %p4, %r40, %r41;
  @%p4 bra $_gr_sdone;
  setp.lt.u32 %p4, %r40, %r33;
  @%p4 bra $_gr_sin;
  mov.u32 %r38, 1;
  @%p3 st.global.u32 [%rd8+12], 1;
  bra $_gr_snext;
$_gr_sin:
  mul.wide.u32 %rd9, %r40, 8;
  add.s64 %rd9, %rd8, %rd9;
  @!%p3 bra $_gr_sfilter;
  ld.volatile.global.u32 %r42, [%rd9+{4 * SHADOW_HEAD + 4}];
  and.b32 %r42, %r42, %r35;
  setp.eq.u32 %p4, %r42, 0;
  @%p4 red.global.or.b32 [%rd9+{4 * SHADOW_HEAD + 4}], %r35;
  ld.volatile.global.u32 %r43, [%rd9+{4 * SHADOW_HEAD}];
$_gr_sclaim:
  setp.eq.u32 %p4, %r43, %r36;
  setp.eq.or.u32 %p4, %r43, -1, %p4;
  @%p4 bra $_gr_snext;
  setp.ne.u32 %p4, %r43, 0;
  @%p4 atom.global.exch.b32 %r44, [%rd9+{4 * SHADOW_HEAD}], -1;
  @%p4 bra $_gr_snext;
  atom.global.cas.b32 %r43, [%rd9+{4 * SHADOW_HEAD}], 0, %r36;
  setp.eq.u32 %p4, %r43, 0;
  @%p4 bra $_gr_snext;
  bra $_gr_sclaim;
$_gr_sfilter:
  ld.global.u32 %r43, [%rd9+{4 * SHADOW_HEAD}];
  ld.global.u32 %r42, [%rd9+{4 * SHADOW_HEAD + 4}];
  setp.eq.u32 %p5, %r43, -1;
  and.b32 %r44, %r42, 2;
  setp.ne.u32 %p6, %r44, 0;
  and.b32 %r44, %r42, 5;
  setp.eq.or.u32 %p6, %r44, 5, %p6;
  and.pred %p6, %p6, %p5;
  @%p6 mov.u32 %r38, 1;
  @%p6 bra $_gr_snext;
  setp.ne.and.u32 %p6, %r43, %r36, !%p5;
  and.b32 %r44, %r42, %r35;
  setp.eq.or.u32 %p6, %r44, 0, %p6;
  @%p6 mov.u32 %r39, 1;
$_gr_snext:
  add.u32 %r40, %r40, 1;
  bra $_gr_sloop;
$_gr_sdone:
  setp.ne.u32 %p4, %r39, 0;
  @%p4 red.global.add.u32 [%rd8+12], 1;
  setp.ne.and.u32 %p2, %r38, 0, !%p3;"""


# The per-block local area of backends/prefilter.py (docs/internals.md §7), for a
# shared access of a block < G whose words [lw0 + off / 4, lw0 + (off + size - 1) / 4]
# of the block's local order lie below L: the OpenCL runtime's `_gr_local` in PTX. Each
# word's state (actor, kinds, local epoch) is updated by compare-exchange in build
# and filter runs; where it may conflict (or is at a later epoch: divergence), mask
# bit `epoch % 32` is set; a filter run logs the access iff one of its words has its
# bit set and counts in [3] the bits it sets that the build run did not. Other
# accesses go on to the launch-wide pairs ($_gr_lskip).
LOCAL_PTX = """\
  and.b32 %r47, %r2, 4;
  setp.eq.u32 %p5, %r47, 0;
  @%p5 bra $_gr_lskip;
  ld.global.u32 %r48, [%rd8+16];
  ld.global.u32 %r49, [%rd8+20];
  setp.eq.u32 %p5, %r48, 0;
  setp.ge.or.u32 %p5, %r5, %r49, %p5;
  @%p5 bra $_gr_lskip;
  shr.u32 %r50, %r3, 2;
  add.u32 %r50, %r50, %r46;
  shr.u32 %r51, %r2, 8;
  and.b32 %r51, %r51, 255;
  add.u32 %r51, %r3, %r51;
  add.u32 %r51, %r51, -1;
  shr.u32 %r51, %r51, 2;
  add.u32 %r51, %r51, %r46;
  setp.ge.u32 %p5, %r51, %r48;
  @%p5 bra $_gr_lskip;
  ld.global.u32 %r52, [%rd8+24];
  mad.lo.u32 %r53, %r5, %r48, %r52;
  mul.wide.u32 %rd10, %r53, 4;
  add.s64 %rd10, %rd8, %rd10;
  mul.wide.u32 %rd11, %r49, %r48;
  shl.b64 %rd11, %rd11, 2;
  add.u32 %r54, %r4, 1;
  min.u32 %r54, %r54, 8191;
  mov.u32 %r45, 1;
  and.b32 %r55, %r2, 3;
  add.u32 %r55, %r55, 13;
  shl.b32 %r55, %r45, %r55;
  and.b32 %r56, %r6, 65535;
  and.b32 %r57, %r6, 31;
  shl.b32 %r57, %r45, %r57;
  mov.u32 %r38, 0;
  mov.u32 %r39, 0;
  mov.u32 %r40, %r50;
$_gr_lloop:
  setp.gt.u32 %p5, %r40, %r51;
  @%p5 bra $_gr_ldone;
  mul.wide.u32 %rd9, %r40, 4;
  add.s64 %rd9, %rd10, %rd9;
  mov.u32 %r58, 0;
  mov.u32 %r59, 0;
  ld.volatile.global.u32 %r43, [%rd9];
$_gr_lcas:
  shr.u32 %r60, %r43, 16;
  setp.eq.u32 %p5, %r43, 0;
  sub.u32 %r61, %r56, %r60;
  and.b32 %r61, %r61, 65535;
  setp.ne.u32 %p6, %r60, %r56;
  setp.lt.and.u32 %p6, %r61, 32768, %p6;
  or.pred %p5, %p5, %p6;
  @!%p5 bra $_gr_lsame;
  shl.b32 %r59, %r56, 16;
  or.b32 %r59, %r59, %r55;
  or.b32 %r59, %r59, %r54;
  bra $_gr_lput;
$_gr_lsame:
  setp.ne.u32 %p6, %r60, %r56;
  @%p6 mov.u32 %r58, 1;
  @%p6 bra $_gr_lmay;
  or.b32 %r59, %r43, %r55;
  and.b32 %r61, %r43, 8191;
  setp.ne.u32 %p6, %r61, %r54;
  @%p6 or.b32 %r59, %r59, 8191;
$_gr_lput:
  setp.eq.u32 %p6, %r59, %r43;
  @%p6 bra $_gr_lmay;
  atom.global.cas.b32 %r61, [%rd9], %r43, %r59;
  setp.eq.u32 %p6, %r61, %r43;
  mov.u32 %r43, %r61;
  @!%p6 bra $_gr_lcas;
$_gr_lmay:
  shr.u32 %r61, %r59, 13;
  and.b32 %r61, %r61, 7;
  and.b32 %r62, %r59, 8191;
  setp.eq.u32 %p6, %r62, 8191;
  and.b32 %r62, %r61, 2;
  setp.ne.u32 %p7, %r62, 0;
  and.b32 %r62, %r61, 5;
  setp.eq.or.u32 %p7, %r62, 5, %p7;
  and.pred %p6, %p6, %p7;
  setp.ne.or.u32 %p6, %r58, 0, %p6;
  add.s64 %rd9, %rd9, %rd11;
  ld.volatile.global.u32 %r62, [%rd9];
  @!%p6 bra $_gr_lnot;
  mov.u32 %r38, 1;
  and.b32 %r63, %r62, %r57;
  setp.ne.u32 %p7, %r63, 0;
  @%p7 bra $_gr_lnext;
  atom.global.or.b32 %r63, [%rd9], %r57;
  and.b32 %r63, %r63, %r57;
  setp.eq.and.u32 %p7, %r63, 0, !%p3;
  @%p7 mov.u32 %r39, 1;
  bra $_gr_lnext;
$_gr_lnot:
  and.b32 %r63, %r62, %r57;
  setp.ne.and.u32 %p7, %r63, 0, !%p3;
  @%p7 mov.u32 %r38, 1;
$_gr_lnext:
  add.u32 %r40, %r40, 1;
  bra $_gr_lloop;
$_gr_ldone:
  setp.ne.u32 %p5, %r39, 0;
  @%p5 red.global.add.u32 [%rd8+12], 1;
  setp.ne.and.u32 %p5, %r38, 0, !%p3;
  and.pred %p2, %p2, %p5;
  bra $_gr_keep;
$_gr_lskip:"""


def srec_function() -> str:
    """``_gr_srec``: append one sync event (warp sync, fence, mbarrier, a named
    barrier over part of the block, ...) to the sync log; never analysed as a
    barrier, kept for later analyses and counted in the report."""
    return f"""\
.func _gr_srec(.param .b64 _gr_buf, .param .b32 _gr_site, .param .b32 _gr_lid,
  .param .b32 _gr_grp, .param .b32 _gr_epoch, .param .b32 _gr_extra)
{{
  .reg .pred %p<2>;
  .reg .b32 %r<10>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [_gr_buf];
  ld.param.u32 %r1, [_gr_site];
  ld.param.u32 %r4, [_gr_lid];
  ld.param.u32 %r5, [_gr_grp];
  ld.param.u32 %r6, [_gr_epoch];
  ld.param.u32 %r8, [_gr_extra];
  atom.global.add.u32 %r9, [%rd1], 1;
  ld.global.u32 %r7, [%rd1+4];
  setp.ge.u32 %p1, %r9, %r7;
  @%p1 bra $_gr_sdone;
  mul.wide.u32 %rd2, %r9, 32;
  add.s64 %rd2, %rd1, %rd2;
  mov.u32 %r2, {3 | (2 << 24)};
  mov.u32 %r3, 0;
  mov.u32 %r7, 0;
  st.global.v4.u32 [%rd2+{4 * SYNC_HEAD}], {{%r1, %r2, %r3, %r4}};
  st.global.v4.u32 [%rd2+{4 * SYNC_HEAD + 16}], {{%r5, %r6, %r7, %r8}};
$_gr_sdone:
  ret;
}}
"""


def call_rec(
    site: int, flags: str, off: str, epoch: str, value: str, extra: int, lw0: str = "0"
) -> str:
    """A call of ``_gr_rec`` (operands: registers or immediates); `lw0` is a shared
    variable's first word in the block's local order (the prefilter's local area)."""
    args = [
        ("b64", "%_gr_log"),
        ("b64", "%_gr_ctl"),
        ("b64", "%_gr_shd"),
        ("b32", str(site)),
        ("b32", flags),
        ("b32", off),
        ("b32", "%_gr_lid"),
        ("b32", "%_gr_grp"),
        ("b32", epoch),
        ("b32", value),
        ("b32", str(extra)),
        ("b32", lw0),
    ]
    return _call("_gr_rec", args)


def call_srec(site: int, extra: int) -> str:
    args = [
        ("b64", "%_gr_sync"),
        ("b32", str(site)),
        ("b32", "%_gr_lid"),
        ("b32", "%_gr_grp"),
        ("b32", "%_gr_nbar"),
        ("b32", str(extra)),
    ]
    return _call("_gr_srec", args)


def _call(fn: str, args: list[tuple[str, str]]) -> str:
    decl = " ".join(f".param .{t} _gr_a{i};" for i, (t, _) in enumerate(args))
    stores = "\n".join(f"st.param.{t} [_gr_a{i}], {v};" for i, (t, v) in enumerate(args))
    names = ", ".join(f"_gr_a{i}" for i in range(len(args)))
    return f"{{\n{decl}\n{stores}\ncall {fn}, ({names});\n}}"


def fnv_bytes(word: str, nbytes: int, h: str = "%_gr_val", tmp: str = "%_gr_t20") -> list[str]:
    """FNV-1a over the low `nbytes` bytes of the b32 register `word`, into `h`."""
    out = []
    for b in range(nbytes):
        out += [
            f"shr.u32 {tmp}, {word}, {8 * b};",
            f"and.b32 {tmp}, {tmp}, 255;",
            f"xor.b32 {h}, {h}, {tmp};",
            f"mul.lo.u32 {h}, {h}, {FNV_PRIME};",
        ]
    return out
