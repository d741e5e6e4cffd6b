"""PTX text that the rewriter inserts: the record appenders and per-site code.

Every inserted piece is wrapped in ``/*<gr*/ ... /*gr>*/`` so that removing the
marked spans gives back the original PTX byte for byte (the tests check this).
"""

from __future__ import annotations

import re

from gpurace import abi, shaders

# event slots per group in the control buffer: the OpenCL runtime's scheme (internals §5);
# the sync-event log (third parameter `_gr_sync`): [0] records requested, [1] capacity,
# records of RECORD_WORDS words from word SYNC_HEAD on. All of gpurace/abi.py; PTX has
# no named constants, so the byte offsets below are computed from it here.
from gpurace.abi import EVENT_SLOTS, FNV_OFFSET, FNV_PRIME, SHADOW_HEAD, SYNC_HEAD  # noqa: F401

OPEN, CLOSE = "/*<gr*/", "/*gr>*/"
SCRATCH32, SCRATCH64, SCRATCH_PRED = 24, 4, 4


def wrap(text: str) -> str:
    return f"{OPEN}\n{text}\n{CLOSE}"


def _values(nvars: int) -> dict[str, int]:
    """What each ``${NAME}`` of ``shaders/runtime.ptx`` stands for: every value of
    gpurace/abi.py (and, as ``NAME_B``, its byte offset), a few derived from them, and
    the control words' offsets that depend on the module's `nvars` tracked variables."""
    names = abi.values(list(abi.GROUPS))
    out = {**names, **{f"{n}_B": 4 * v for n, v in names.items()}}
    out.update(
        SHD_PAIRS_B=4 * SHADOW_HEAD,  # the first pair's actor word ...
        SHD_KINDS_B=4 * SHADOW_HEAD + 4,  # ... and its kinds word
        SYNC_HEAD_B=4 * SYNC_HEAD,
        SYNC_RECORD_HI_B=4 * SYNC_HEAD + 16,  # a sync record's second v4 store
        SYNC_FLAGS=abi.KIND_EVENT | (2 << abi.F_EVENT_SHIFT),  # kind EVENT, event 2 (sync)
        EV_CODES=EVENT_SLOTS // abi.EV_ORDINALS,
        EV_ORDINAL_MASK=abi.EV_ORDINALS - 1,
        CTL_BINS0_B=4 * abi.ctl_bins(nvars),
        CTL_EVG0_B=4 * abi.ctl_event_groups(nvars, 0),  # E and the first slot, after
        CTL_EVS0_B=4 * abi.ctl_event_slots(nvars, 0),  # the `nbins` bins
        CTL_OOB_B=4 * abi.ctl_oob(nvars),  # the out-of-bounds area's counter ...
        OOB_REC0_B=4 * (abi.ctl_oob(nvars) + 1),  # ... and its first record
        CTL_SIZES_B=4 * abi.ctl_size(nvars, 0),  # each variable's extent (initcheck:
        CTL_WRITTEN_B=4 * abi.ctl_written(nvars, 0),  # a block's bitmap), its shadow,
        CTL_UNINIT_B=4 * abi.ctl_uninit(nvars),  # the uninitialised-read area's counter
        UNINIT_REC0_B=4 * (abi.ctl_uninit(nvars) + 1),  # and its first record
        F_SPACE_BIT=1 << abi.F_SPACE_SHIFT,
        # a plain access beside cp.async copies in flight: its words' actor MULTI
        F_OWNC_BIT=1 << abi.F_OWNC_SHIFT,
        # an access's flags less the value-known bit: an uninitialised-read record's
        F_RECORD_MASK=~(1 << abi.F_KNOWN_SHIFT),
    )
    return out


def runtime(nvars: int) -> str:
    """``shaders/runtime.ptx`` (from its first ``.func``) for a module with `nvars`
    tracked variables: `_gr_rec`, `_gr_srec`, `_gr_oob`, then `_gr_init`."""
    text = shaders.text("runtime.ptx")
    values = _values(nvars)
    text = text[text.index(".func _gr_rec") :]  # after the file's own comments
    return re.sub(r"\$\{(\w+)\}", lambda m: str(values[m.group(1)]), text)


def rec_function(nvars: int) -> str:
    """``_gr_rec``: append one record to the log, honouring the control words.

    The control buffer is docs/internals.md §5's: [0] requested, [1] capacity, [2]/[3]
    the linear address range [lo, hi), [4]/[5] histogram bins and width (a counting
    run when bins > 0), [6 + v] each variable's linear base, [6 + NV + v] its size,
    [6 + 2 NV] unattributed accesses, [7 + 2 NV] the OpenCL async-copy flags (unused
    here), the out-of-bounds area (unused here: docs/memcheck.md), the bins
    (abi.ctl_bins), then E (groups with event slots) and EVENT_SLOTS
    words per group. An access is kept if a 4-byte word it
    touches lies in [lo, hi); an event if its group does and no work-item of the group
    with a lower-or-equal `lid` claimed its slot with the same (ordinal, site) (the
    OpenCL runtime's `_gr_ev_new`: the analysis needs only the lowest of each). The
    prefilter's shadow `_gr_shd` (its header's mode: 0 off, 1 build, 2 filter) decides
    which accesses are logged: the OpenCL runtime's `_gr_local` for shared words of the
    block's local area (`_gr_lw0`: the variable's first word there), else its
    `_gr_shadow` (the launch-wide pairs), both in PTX.
    """
    text = runtime(nvars)
    return text[: text.index(".func _gr_srec")]


def srec_function() -> str:
    """``_gr_srec``: append one sync event (warp sync, fence, mbarrier, a named
    barrier over part of the block, ...) to the sync log; never analysed as a
    barrier, kept for later analyses and counted in the report."""
    text = runtime(0)
    return text[text.index(".func _gr_srec") : text.index("// An access that does not lie")]


def oob_function(nvars: int) -> str:
    """``_gr_oob``: record an access outside every tracked variable of its space, or
    one that starts inside a variable and ends past it (docs/memcheck.md): the
    variable it is out of bounds of is the nearest below its address, else above,
    chosen from the entry's variable table (`bounds.TABLE`)."""
    text = runtime(nvars)
    return text[text.index("// An access that does not lie") : text.index(INIT_MARK)]


INIT_MARK = "// initcheck (docs/memcheck.md"


def init_function(nvars: int) -> str:
    """``_gr_init``: test a read's bytes against its variable's written-shadow and
    record an uninitialised read; set a write's bytes (docs/memcheck.md, initcheck).
    Added only to modules with a checked variable (`call_init`)."""
    text = runtime(nvars)
    return text[text.index(INIT_MARK) :]


def call_init(site: int | str, flags: str, off: str, extra: int, grp: str = "%_gr_grp") -> str:
    """A call of ``_gr_init`` for an attributed access (`flags` with its variable);
    `grp`: the block whose written-shadow it is (a shared variable's owner block in
    a kernel with distributed shared memory, cluster.py)."""
    args = [
        ("b64", "%_gr_ctl"),
        ("b32", str(site)),
        ("b32", flags),
        ("b32", off),
        ("b32", "%_gr_lid"),
        ("b32", grp),
        ("b32", str(extra)),
    ]
    return _call("_gr_init", args)


def call_oob(site: int | str, flags: str, ntab: int) -> str:
    """A call of ``_gr_oob`` for the address in %_gr_d0, with the entry's variable
    table (`ntab` slots) and the access's flags (kind, space, size; no variable: an
    immediate or a register)."""
    args = [
        ("b64", "%_gr_ctl"),
        ("b64", "%_gr_vt"),
        ("b32", str(ntab)),
        ("b64", "%_gr_d0"),
        ("b32", str(site)),
        ("b32", flags),
        ("b32", "%_gr_lid"),
        ("b32", "%_gr_grp"),
    ]
    return _call("_gr_oob", args)


def call_rec(
    site: int | str,
    flags: str,
    off: str,
    epoch: str,
    value: str,
    extra: int | str,
    lw0: str = "0",
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
