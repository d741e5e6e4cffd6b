"""The device ABI: every word layout that host code and device code share.

The log record, the control words, the prefilter's shadow, the event slots, the
analysis kernels' tables and the content hash are defined here once. The shaders
do not restate them: `shaders.source` prepends the WGSL ``const``s or C
``#define``s that `wgsl_consts` / `c_defines` generate from this module, and the
rewriters' runtimes get the same text (prefixed ``_GR_``, so that no name of the
user's program is taken). tests/test_abi.py fails if a shader defines its own copy
of a generated name or uses one that does not exist. docs/internals.md §1, §2 and
§5 describe the meaning of each word; this module is where the numbers live.

Where the backends still differ, the difference is named here:

- `SHD_LOCAL_OOB` (shadow header word 7) is set by WGSL kernels on a workgroup
  access beyond its variable (robustness clamps the real access). Since memcheck
  (docs/memcheck.md) a WGSL access whose index is out of range is caught by its
  bounds check and never logged, so the word is a backstop that no checked access
  sets. A WGSL build run also sets it when its banked local states
  (shaders/lbank.wgsl) meet accesses and clears out of barrier order (barrier
  divergence): either way, filter runs log every local access. The OpenCL and CUDA
  runtimes attribute every access by address, so they never meet such an access.
  CUDA leaves the word 0; OpenCL uses it as `SHD_CONFLICT`: its build run sets
  `CONFLICT_SEEN` when it leaves a word that may conflict, so that the host reads
  the header, not the whole shadow.
- The out-of-bounds area (`CTL_OOB`, `OOB_*`) is written by WGSL kernels (by index,
  in elements) and OpenCL and CUDA kernels (by address, in bytes).
- The uninitialised-read area (`CTL_UNINIT`, `UNINIT_*`) and the written-shadows
  (`ctl_written`, `place_written`) are used by WGSL, OpenCL and CUDA kernels with a
  checked variable (docs/memcheck.md), the same way on all three (CUDA's
  `_gr_init` in shaders/runtime.ptx, called twice for a compare-exchange: its read
  before it, its write after it only when it exchanged), except the shadow's fill
  count (`written_stride`): OpenCL and WGSL (for a workgroup variable) keep it and
  skip the shadow of a variable once it is full; CUDA, and WGSL for a storage buffer
  (its size is not in the shader's text), leave it 0 and test every access. WGSL
  writes an invocation's uninitialised-read records where it exits, each with the
  least byte of its (site, flags) reads (gpurace/instrument/wgsl/initcheck.py): the
  host's findings are the same.
- The control words' sizes, unattributed counter and event slots are filled and
  read by the OpenCL and CUDA backends only; WGSL kernels attribute statically,
  deduplicate events in workgroup memory (`WGSL_EVENT_SLOTS`) and are given 0
  there. The async-copy word is written by OpenCL kernels only (the others leave
  it 0). The layout (and so every index below) is the same on all three APIs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

# ---------------------------------------------------------------------------
# Log records (docs/internals.md §1): RECORD_WORDS little-endian u32 words.
# ---------------------------------------------------------------------------

RECORD_WORDS = 8
W_SITE = 0  # site id (index into the instrumented module's site table)
W_FLAGS = 1  # kind | space<<2 | known<<3 | size<<8 | var<<16 | event<<24 (accesses: named<<24)
W_OFFSET = 2  # byte offset inside the tracked variable
W_LID = 3  # local invocation index (linear, inside the work-group)
W_GROUP = 4  # work-group linear id: x + y*nx + z*nx*ny
W_EPOCH = 5  # epoch of the access's space; for barrier/exit events: barrier ordinal
W_VALUE = 6  # stored bits (<= 4 bytes) or FNV-1a hash of the stored words
W_EXTRA = 7  # atomics: op code; barriers: which epochs advanced (1 local, 2 global)

# accesses: the W_EXTRA bits from X_WEPOCH_SHIFT on hold the *warp epoch* (CUDA only;
# 0 elsewhere): the full-warp __syncwarp()s the thread passed since its last block
# barrier, saturating at WEPOCH_MAX (docs/ordering.md). Lanes lid // WARP_SIZE.
X_WEPOCH_SHIFT = 16
WEPOCH_MAX = 0xFFFF
WARP_SIZE = 32
# a tensor-memory (TMEM, docs/tmem.md) record's W_OFFSET: row * TMEM_ROW_BYTES + column * 4
# (128 rows of TMEM_COLUMNS 32-bit cells per block); host-side only
TMEM_ROWS, TMEM_COLUMNS = 128, 512
TMEM_ROW_BYTES = 4 * TMEM_COLUMNS

# accesses: the W_FLAGS bits from F_NAMED_SHIFT on (free there: the event field is read
# only for events) hold the *named-barrier state* (CUDA only; 0 elsewhere): bits 0-4
# the thread's operations at its named barrier id (bar.sync/bar.arrive with a thread
# count), saturating at NAMED_MAX; bits 5-7 0 when it never waited there, else u where
# its participants are the aligned range of NAMED_UNIT << (u - 1) threads holding it
# (docs/ordering.md, "Named barriers").
F_NAMED_SHIFT = 24
NAMED_OPS_MASK = 0x1F
NAMED_MAX = NAMED_OPS_MASK
NAMED_SPAN_SHIFT = 5
NAMED_UNIT = 32
NAMED_SPANS = 6  # u from 1 to 6: 32 .. 1024 threads
# accesses, CUDA kernels with a grid barrier (cooperative groups' grid.sync()): flags bit
# F_GRID_SHIFT says that the epoch word of this global access holds the thread's *grid
# phase* (grid barriers passed, saturating at GPHASE_MAX) from bit GPHASE_SHIFT, above
# its block epoch (saturating at EPOCH_LOW_MAX); accesses of different grid phases are
# ordered (docs/ordering.md, "Grid barriers"). 0 elsewhere: the word is the epoch.
F_GRID_SHIFT = 5
GPHASE_SHIFT = 20
GPHASE_MAX = 0xFFF
EPOCH_LOW_MAX = (1 << GPHASE_SHIFT) - 1


def access_bars(flags: int, epoch: int) -> int:
    """An access record's block barrier count for the release/acquire clocks: its
    epoch word, without the grid or cluster phase above the block epoch where flags
    bit F_GRID_SHIFT says one is there (analysis.cl's `access_bars`)."""
    return epoch & EPOCH_LOW_MAX if (flags >> F_GRID_SHIFT) & 1 else epoch


# a thread against its own asynchronous copy (docs/async.md rule 5; CUDA cp.async
# completed by cp.async.wait_group/wait_all, PTX path only; 0 elsewhere): flags bit
# F_ASYNC_SHIFT marks a copy's record (its source load, its destination store), whose
# W_EXTRA bits 0-15 hold its number n among its thread's copies (mod OWN_SEQ_MOD) <<
# OWN_SEQ_SHIFT; bit F_OWNC_SHIFT marks a plain load or store of a function with such
# copies, whose W_EXTRA bits 0-15 hold the copies its thread issued so far, h (mod
# OWN_SEQ_MOD) << OWN_SEQ_SHIFT | the number d of them still in flight (at most the
# queue's 32: they are the last d issued, groups complete in order). Atomics carry
# neither bit (their op code is in those bits). The same work-item's flagged pair
# conflicts iff 0 < (h - n) mod OWN_SEQ_MOD <= d: the copy was issued before the access
# and not completed. A copy that is a thread of its own in the clocks (completed through
# an mbarrier: rules 4 and 6) carries bit F_OWNC_SHIFT with h = 0, d = 1, so that the
# prefilters count its words as several actors (its own thread's accesses meet it
# there; the clocks decide them: docs/internals.md §1).
F_ASYNC_SHIFT = 6
F_OWNC_SHIFT = 7
OWN_SEQ_SHIFT = 6
OWN_SEQ_MOD = 1024
OWN_FLIGHT_MASK = (1 << OWN_SEQ_SHIFT) - 1
# ORDER events (model.Event.ORDER, docs/ordering.md "Release and acquire"): one after
# each atomic and at each fence of a module with a non-relaxed atomic or a fence.
# W_OFFSET/var/size/space as the atomic's access; W_EPOCH the value read, W_VALUE the
# value written (low 32 bits); W_EXTRA: op (0 a fence) | scope << 8 | order << 12 as
# an atomic's, then these bits, and the thread's block-barrier count from bit 20.
EV_ORDER = 4  # the event code (model.Event.ORDER); the device analysis skips it
O_READ = 1 << 16  # it read memory (W_EPOCH holds the value)
O_WRITE = 1 << 17  # it wrote memory (W_VALUE holds the value, unless O_WUNKNOWN)
O_WUNKNOWN = 1 << 18  # the value written is not known (a `red`, a float min/max)
O_MB_REMOTE = 1 << 19  # an mbarrier arrival on another block's barrier: W_EPOCH its owner + 1
# an O_MB_COPY event's W_EPOCH, the copy's number: its bits 16-29 a st.async's
# destination block + 1 (0: the thread's own block), bit 30 a tcgen05 op's
# (instrument/ptx/tcgen05_mma.NUMBER_BASE), bits 0-15 the count
COPY_OWNER_MASK = 0x3FFF
O_BARRIERS_SHIFT = 20  # block barriers passed before it, saturating at O_BARRIERS_MAX
O_BARRIERS_MAX = 0xFFF
# mbarrier operations' ORDER events (docs/ordering.md, "mbarriers"): their op code in
# place of an atomic's; W_OFFSET the barrier's shared address, var O_MB_VAR; W_VALUE an
# arrival's state token (sim: the phase it arrived on) or init's count, W_EPOCH a
# successful wait's parity or token. Neither O_READ nor O_WRITE: no value matching.
O_MB_INIT, O_MB_ARRIVE, O_MB_WAIT_PARITY, O_MB_WAIT_TOKEN = 0x20, 0x21, 0x22, 0x23
# an asynchronous copy completed through an mbarrier (docs/async.md): O_MB_COPY opens
# the copy's records (the thread's access records up to its next ORDER event, an
# O_MB_COPY_END), W_EPOCH the copy's number in its thread, W_VALUE the phase of the
# barrier at W_OFFSET whose completion completes the copy
O_MB_COPY, O_MB_COPY_END = 0x24, 0x25
O_MB_VAR = 0xFF
# scopes and orders of an atomic's or an ORDER event's extra word (bits 8-11, 12-15)
SCOPE_CTA, SCOPE_CLUSTER, SCOPE_GPU, SCOPE_SYS = 1, 2, 3, 4
ORDER_RELAXED, ORDER_ACQUIRE, ORDER_RELEASE, ORDER_ACQ_REL = 1, 2, 3, 4
ORDER_VOLATILE, ORDER_MMIO, ORDER_SC = 5, 6, 7

# fields of W_FLAGS
F_KIND_MASK = 0x3  # bits 0-1: model.Kind
F_SPACE_SHIFT = 2  # bit 2: model.Space
F_KNOWN_SHIFT = 3  # bit 3: the value word holds the stored value
F_READS_SHIFT = 4  # bit 4, atomics only: it only read (a failed compare-exchange)
F_SIZE_SHIFT = 8  # bits 8-15: bytes accessed
F_VAR_SHIFT = 16  # bits 16-23: TrackedVar.id
F_EVENT_SHIFT = 24  # bits 24-27: model.Event (events only)
F_BYTE_MASK = 0xFF  # the size and var fields
F_EVENT_MASK = 0xF
KIND_EVENT = 3  # model.Kind.EVENT: a record whose kind is this is a barrier or an exit
# an mbarrier operation's ORDER event (instrument/ptx/mbarriers.py): shared space, 8
# bytes, var O_MB_VAR; here so that the log's readers (analysis/protocol_log.py) need
# not import the PTX rewriter (~20 ms of an OpenCL or WGSL check's start)
MB_EVENT_FLAGS = (
    KIND_EVENT
    | EV_ORDER << F_EVENT_SHIFT
    | 1 << F_SPACE_SHIFT
    | 8 << F_SIZE_SHIFT
    | O_MB_VAR << F_VAR_SHIFT
)

FNV_OFFSET = 2166136261  # FNV-1a of the stored bytes of a store wider than 4 bytes
FNV_PRIME = 16777619

# ---------------------------------------------------------------------------
# Control words (docs/internals.md §1, §5): one layout for every API.
# ---------------------------------------------------------------------------

CTL_REQUESTED = 0  # records requested (atomic bump; may exceed the capacity)
CTL_CAPACITY = 1  # records the log holds
CTL_LO = 2  # the address range [lo, hi) of the linear order to log
CTL_HI = 3
CTL_NBINS = 4  # histogram bins (> 0: a counting run) ...
CTL_BINW = 5  # ... and their width in addresses
CTL_BASES = 6  # then each variable's base in the linear address order
# A logging run (no bins) reads CTL_BINW as its *order word* (docs/ordering.md, "Where
# it is decided"): in an ordered launch split into address-range passes every pass
# logs each ORDER event (bit 0) and the plain stores to the variables whose bits
# 1 + min(var, ORDER_VAR_LAST) are set, whatever its range; 0 elsewhere.
CTL_ORDER = CTL_BINW
ORDER_EVENTS = 1
ORDER_VAR_LAST = 30  # variables from this id on share its bit


def order_word(variables: Iterable[int]) -> int:
    """The order word of a run that logs every ORDER event and the plain stores to
    `variables` (ids) in every pass."""
    word = ORDER_EVENTS
    for v in variables:
        word |= 1 << (1 + min(v, ORDER_VAR_LAST))
    return word


def ctl_base(v: int) -> int:
    """Variable `v`'s base in the linear address order."""
    return CTL_BASES + v


def ctl_size(nv: int, v: int) -> int:
    """Variable `v`'s extent in bytes in this launch (OpenCL, CUDA; 0 on WGSL)."""
    return CTL_BASES + nv + v


def ctl_unattributed(nv: int) -> int:
    """The counter of accesses that point into no tracked variable (OpenCL, CUDA)."""
    return CTL_BASES + 2 * nv


def ctl_copies(nv: int) -> int:
    """The async-copy word (OpenCL): the COPY_* bits of copy windows not modelled."""
    return ctl_unattributed(nv) + 1


def ctl_loops(nv: int) -> int:
    """The loop word (WGSL): bit min(loop, 31) set when that loop was cut short by the
    driver's iteration limit (gpurace/instrument/wgsl/loops.py)."""
    return ctl_copies(nv) + 1


def ctl_oob(nv: int) -> int:
    """The out-of-bounds area (docs/memcheck.md): its counter, then OOB_SLOTS records."""
    return ctl_loops(nv) + 1


def ctl_uninit(nv: int) -> int:
    """The uninitialised-read area (docs/memcheck.md, initcheck): its counter, then
    UNINIT_SLOTS records."""
    return ctl_oob(nv) + OOB_AREA_WORDS


def ctl_written(nv: int, v: int) -> int:
    """Variable `v`'s written-shadow: the control word where its bitmap starts (one bit
    per byte; a __local/workgroup variable has one bitmap per work-group), 0 when the
    variable is not checked for uninitialised reads."""
    return ctl_uninit(nv) + UNINIT_AREA_WORDS + v


def ctl_bins(nv: int) -> int:
    """The first histogram bin of a counting run."""
    return ctl_written(nv, nv)


def ctl_event_groups(nv: int, nbins: int) -> int:
    """`E`, the work-groups with event slots (0 on WGSL), after the bins."""
    return ctl_bins(nv) + nbins


def ctl_event_slots(nv: int, nbins: int) -> int:
    """The first of the EVENT_SLOTS words of each of the `E` groups."""
    return ctl_event_groups(nv, nbins) + 1


def control_words(
    capacity: int,
    log_range: Sequence[int],
    nbins: int,
    width: int,
    bases: Sequence[int],
    sizes: Sequence[int] | None = None,
    slotted: int = 0,
) -> list[int]:
    """The control words of one launch up to its event slots (which start at 0):
    the counters and bins zero, `sizes` 0 where the API does not attribute by
    address, `slotted` groups with event slots, no variable's written-shadow yet
    (`place_written` lays them out)."""
    nv = len(bases)
    head = [0, capacity, *log_range, nbins, width, *bases, *(sizes or [0] * nv)]
    # unattributed, copies, loops, the out-of-bounds and uninitialised-read areas
    head += [0] * (3 + OOB_AREA_WORDS + UNINIT_AREA_WORDS) + [0] * nv
    return head + [0] * nbins + [slotted]


def written_stride(size: int) -> int:
    """Control words of one written-shadow of a variable of `size` bytes: its bitmap
    (ceil(size / 32) words, one bit per byte), then the *fill count*, the number of its
    bits set (a write adds the bits its atomic OR newly set: the OR's old value says
    which). A count equal to `size` means every byte is written: from then on the
    work-item that sees it skips the shadow for that variable (docs/memcheck.md "Cost";
    the verdict is the bitmap's). CUDA's `_gr_init` keeps the layout but not the count
    (it has no per-thread state to remember "full" in): its counts stay 0."""
    return -(-size // 32) + 1


def place_written(
    words: list[int], first: int, extents: Sequence[int], instances: Sequence[int]
) -> int:
    """Lay out the written-shadows (docs/memcheck.md) from control word `first` on (after
    the event slots) and set each variable's `ctl_written` word in `words` (a launch's
    `control_words`); returns the shadows' words, which start at 0. Variable v has
    `instances[v]` shadows (its launch's work-groups for a __local/workgroup variable,
    1 for a global buffer, 0 when it is not checked) of `written_stride(extents[v])`
    words each: the bitmap, one bit per byte, then its count of bits set."""
    nv = len(extents)
    at = first
    for v, (size, n) in enumerate(zip(extents, instances, strict=True)):
        need = n * written_stride(size)
        words[ctl_written(nv, v)] = at if need else 0
        at += need
    return at - first


def par_shadow(nv: int) -> int:
    """WGSL's read-only copy of the parameters (``_gr_par``) is the control words up to
    the bins, then the shadow's header: where that header starts."""
    return ctl_bins(nv)


def per_kernel(nv: int) -> dict[str, int]:
    """The indices that depend on the kernel's `nv` tracked variables, as the runtimes
    name them (prefixed like the rest: ``_GR_NV``, ``_GR_CTL_BINS0`` ...); the event
    groups and slots follow the run's bins: ``ctl[_GR_CTL_EVG0 + nbins]``."""
    return {
        "NV": nv,
        "CTL_SIZES": ctl_size(nv, 0),
        "CTL_UNATTRIBUTED": ctl_unattributed(nv),
        "CTL_COPIES": ctl_copies(nv),
        "CTL_LOOPS": ctl_loops(nv),
        "CTL_OOB": ctl_oob(nv),
        "CTL_UNINIT": ctl_uninit(nv),
        "CTL_WRITTEN": ctl_written(nv, 0),
        "CTL_BINS0": ctl_bins(nv),
        "CTL_EVG0": ctl_event_groups(nv, 0),
        "CTL_EVS0": ctl_event_slots(nv, 0),
        "PAR_SHD": par_shadow(nv),
    }


# The async-copy word (OpenCL, docs/internals.md §5): the pending-copy table of a
# work-item holds COPY_TABLE copies; a copy that finds it full sets COPY_FULL, a
# wait_group_events with fewer events than copies pending sets COPY_SHORT_WAIT and,
# the first time, its event and pending-copy counts (at most 255) in the fields.
COPY_TABLE = 8
COPY_SHORT_WAIT, COPY_FULL = 1, 2
COPY_N_SHIFT, COPY_M_SHIFT, COPY_COUNT_MASK = 8, 16, 0xFF

# The out-of-bounds area of the control words (docs/memcheck.md), between the
# async-copy word and the bins: [CTL_OOB] counts every access outside its variable
# (atomic bump), then OOB_SLOTS records of RECORD_WORDS words hold the first ones.
# An OOB record: W_SITE, W_FLAGS (the access's kind, space, size, var), W_LID and
# W_GROUP as a log record's; OOB_INDEX the index (signed) and OOB_BOUND the bound
# it broke, in elements of the dimension OOB_DEPTH (0 the outermost) or, where
# OOB_UNIT is OOB_BYTES (OpenCL, CUDA: attributed by address), in bytes from the
# variable's base. Every run of a launch writes the same area: the host reads it
# from any one, never from the log, so OOB records never reach the race analysis.
OOB_SLOTS = 64
OOB_AREA_WORDS = 1 + OOB_SLOTS * RECORD_WORDS
OOB_INDEX, OOB_BOUND, OOB_DEPTH, OOB_UNIT = W_OFFSET, W_VALUE, W_EPOCH, W_EXTRA
OOB_ELEMENTS, OOB_BYTES = 0, 1

# The uninitialised-read area (docs/memcheck.md, initcheck), after the out-of-bounds
# area: [CTL_UNINIT] counts every read of bytes no work-item wrote (atomic bump), then
# UNINIT_SLOTS records in the OOB record's layout, with OOB_INDEX the byte offset of
# the first unwritten byte from the variable's base and OOB_BOUND the variable's size
# in bytes (OOB_UNIT is OOB_BYTES). Then one word per variable (`ctl_written`): where
# its written-shadow starts in the control words (after the event slots), 0 for a
# variable not checked. The shadows (one bit per byte) are set by every write and
# tested by every read of a checked variable.
UNINIT_SLOTS = 256
UNINIT_AREA_WORDS = 1 + UNINIT_SLOTS * RECORD_WORDS

# Event slots (docs/internals.md §1, §5): a work-group's events are deduplicated by
# claiming a slot with (ordinal + 1) << EV_ORDINAL_SHIFT | site << EV_SITE_SHIFT | lid.
EVENT_SLOTS = 16  # control words per group (OpenCL, CUDA): 4 ordinals x 4 event codes
EV_ORDINALS = 4  # slots per event code: ordinal % EV_ORDINALS
EV_ORDINAL_SHIFT = 24
EV_SITE_SHIFT = 12
EV_ORDINAL_LIMIT = 255  # ordinals from this one are always logged
EV_ID_LIMIT = 4096  # as are sites and local indices from this one
EV_LID_MASK = EV_ID_LIMIT - 1
WGSL_EVENT_SLOTS = 5  # WGSL's var<workgroup> slots: 4 barrier ordinals, then the exit
WGSL_EXIT_SLOT = 4
# at most this many work-groups get event slots in the control buffer (16 MiB of
# control words; OpenCL and CUDA): the events of later groups are all logged
MAX_EVENT_SLOT_GROUPS = 1 << 18

# sync-event log of the CUDA backend: [0] requested, [1] capacity, records from SYNC_HEAD
SYNC_W_REQUESTED, SYNC_W_CAPACITY, SYNC_HEAD = 0, 1, 8
# after its records (from SYNC_HEAD + capacity * RECORD_WORDS): the named-barrier area,
# [0] the named-barrier operations not modelled (counted here: never dropped), then per
# block of the first NAMED_GROUPS, per barrier id, NAMED_WORDS words: the participants'
# range claim ((lid / count + 1) | count / 32 << 16) and how many threads took part
# (docs/ordering.md, "Named barriers")
NAMED_GROUPS = 1 << 12
NAMED_IDS = 16
NAMED_WORDS = 2
NAMED_AREA_WORDS = 1 + NAMED_GROUPS * NAMED_IDS * NAMED_WORDS


# after the named area: the mbarrier shadow (docs/protocols.md, "The GPU path";
# gpurace/instrument/ptx/mbshadow.py): one word (the count of operations without a
# slot, which keeps the slots 8-byte aligned), then per block of the first MB_GROUPS,
# MB_SLOTS slots of MB_WORDS words: the key (the barrier's shared offset + 1, claimed
# by a compare-and-swap), the count of arrivals a phase expects, the state (one 64-bit
# word: transaction bytes outstanding, signed, bits 0-31; arrivals pending, 32-47;
# completed phases, 48-63), and one more than the highest phase a wait observed
MB_GROUPS = 1 << 10
MB_SLOTS = 16
MB_WORDS = 6
MB_AREA_WORDS = 1 + MB_GROUPS * MB_SLOTS * MB_WORDS
MB_PENDING_SHIFT, MB_PHASE_SHIFT = 32, 48
MB_OVER = 1 << 31  # an arrival's logged phase: it arrived beyond the phase's count


def sync_words(capacity: int) -> int:
    """The sync buffer's size in words: the head, `capacity` records, the named area,
    the mbarrier shadow."""
    return SYNC_HEAD + capacity * RECORD_WORDS + NAMED_AREA_WORDS + MB_AREA_WORDS


# ---------------------------------------------------------------------------
# The prefilter's shadow (backends/prefilter.py, docs/internals.md §2, §5).
# ---------------------------------------------------------------------------

SHADOW_HEAD = 8  # header words
SHD_MODE = 0  # SHADOW_OFF, SHADOW_BUILD or SHADOW_FILTER
SHD_WORDS = 1  # launch-wide words covered `W`
SHD_WGSIZE = 2  # work-items per group
# build runs: 1 if an access touched a word beyond the shadow; filter runs: the
# *unseen* counter (accesses the build run did not see: the run is repeated unfiltered)
SHD_UNSEEN = 3
SHD_LWORDS = 4  # local words per group `L`
SHD_LGROUPS = 5  # groups with a local area `G`
SHD_LOFF = 6  # the local area's first word (SHADOW_HEAD + 2 W)
SHD_LOCAL_OOB = 7  # WGSL: the build run met a local access beyond its variable, or
# banked local states out of barrier order: filter runs log every local access
# OpenCL: the same word, bit 0 set by the build run that leaves a word that may conflict
# (so the host reads the header, not the whole shadow: `opencl_backend.shadow_may_conflict`);
# bit 1 set by a run without 64-bit atomics, whose flag is left to the device search
SHD_CONFLICT = SHD_LOCAL_OOB
CONFLICT_SEEN, CONFLICT_SEARCH = 1, 2
SHADOW_OFF, SHADOW_BUILD, SHADOW_FILTER = 0, 1, 2
PAIR_WORDS = 2  # launch-wide area: (actor, kinds) per word
MULTI = 0xFFFFFFFF  # an actor word: several actors
# a kinds word (and a local state's kinds field): bit 1 << model.Kind
KB_LOAD, KB_STORE, KB_ATOMIC = 1, 2, 4
# OpenCL: bit 31 of a load's kind argument to `_gr_acc` (never in a record): the same
# work-item stores to the same lvalue later in the same full expression (`y[i] = a *
# y[i]`, `y[i] += v`; the rewriter's `then_store`), so a build run marks the store's
# kind with the load's and the store finds its mark made (docs/internals.md §5)
ACC_THEN_STORE = 1 << 31
# a local state: bits 0-12 actor (lid + 1; LS_MULTI several), 13-15 kinds, 16-31 epoch
LS_MULTI = 0x1FFF
LS_KIND_SHIFT = 13
LS_EPOCH_SHIFT = 16
MASK_EPOCHS = 32  # a local mask word: bit epoch % MASK_EPOCHS


def shadow_pair(word: int) -> int:
    """The actor word of launch-wide word `word` (its kinds word follows)."""
    return SHADOW_HEAD + PAIR_WORDS * word


# ---------------------------------------------------------------------------
# The analysis kernels (shaders/analysis.*, backends/analysis_driver.py).
# ---------------------------------------------------------------------------

NONE = 0xFFFFFFFF  # an empty slot / no variable
ENTRY_WORDS = 10  # entry slot words
BUCKET_WORDS = 6  # bucket slot words
RACE_WORDS = 16  # race slot words
INSTANCE_WORDS = 12  # --all: words per listed instance
DENSE_EVENTS = 16  # barrier ordinals with direct-mapped slots per work-group
MAXE = 8  # entries a walk holds per bucket (more: streamed; see analysis.wgsl's walk)
MAXK = 32  # distinct race keys a walk holds per bucket

# Params: PARAM_WORDS u32 (WGSL's uniform struct Params, a buffer in C)
PARAM_WORDS = 16
P_N_RECORDS, P_ECAP, P_BCAP, P_RCAP, P_UNIFORM_RACE, P_PHASE, P_N_ITEMS, P_ROW = range(8)
P_LO, P_HI, P_WGSIZE, P_SWORDS, P_DGROUPS, P_ALL_CAP, P_L_LEN, P_WORK_LEN = range(8, 16)

# The clock table of a log with ORDER events (docs/ordering.md, "Where it is
# decided"): the VBASE buffer holds VH0 variable bases (a variable id is 8 bits), then
# the table, all offsets in words from VH0. Header words:
VH0 = 256
H_NSEG, H_NRUNS, H_LOCAL, H_SLOTS, H_TH, H_ORD, H_SB, H_STAMP, H_SEG, H_VC = range(10)
H_PAIRS, H_NLOC = 10, 11
# the lock rule (locks.Locked): per stamp the offset of its (lock word, section) pairs
# (H_LK, nstamps + 1 words), the pairs sorted by word (H_LKP; a section NONE: several)
H_LK, H_LKP = 12, 13
H_LBANK = 14  # OpenCL's __local view has clocks: its work-items are slots H_SLOTS + slot
H_WORDS = 15
SB_WORDS = 3  # a segment range of one work-item: first segment, lowest and highest barrier count
SCAN_ITEM_WORDS = 1 + RECORD_WORDS  # order_scan's copy of a record: its index, its words
SLOT_WORDS = 4  # order_scan per work-item and view (global, OpenCL's __local): highest
# barrier count + 1, ~first record index

# counters (C)
C_E_FULL, C_B_FULL, C_R_FULL, C_LIVE, C_RACY, C_BUCKET_FULL = range(6)
C_SITE_RANGE, C_LIST_FULL, C_NEED_ENTRIES, C_NEED_EVENTS, C_WORK = range(6, 11)
COUNTER_WORDS = 16

# entry slot fields
E_OWNER, E_COUNT, E_AMIN, E_AMAX, E_VMIN, E_VMAX, E_UNKNOWN, E_NEXT, E_LMIN, E_LMAX = range(10)
# bucket slot fields
B_OWNER, B_HEAD, B_X0, B_X1, B_X2, B_X3 = range(6)
# race slot fields; R_EX: var, address, group_a, lid_a, group_b, lid_b, epoch_a, epoch_b
R_KEY, R_INST, R_PLO, R_PHI, R_O1, R_O2, R_O3, R_EX = range(8)
EX_WORDS = 8
# bucket tags
T_LOCAL, T_INTRA, T_INTER, T_BARRIER, T_EXIT = range(5)

# the race key: class << 29 | kind_a << 27 | kind_b << 25 | site_a << 13 | site_b
RK_CLASS_SHIFT, RK_KIND_A_SHIFT, RK_KIND_B_SHIFT, RK_SITE_A_SHIFT = 29, 27, 25, 13
RK_SITE_LIMIT = 4096

# ---------------------------------------------------------------------------
# The content hash (shaders/hash.*, gpurace.determinism.hash_words).
# ---------------------------------------------------------------------------

HASH_GOLDEN = 0x9E3779B1
HASH_LANE_B = 0x7F4A7C15
HASH_WORKGROUP = 256

# ---------------------------------------------------------------------------
# Generated shader text.
# ---------------------------------------------------------------------------

# name groups a shader may ask for
GROUPS: dict[str, list[str]] = {
    "record": (
        "RECORD_WORDS W_SITE W_FLAGS W_OFFSET W_LID W_GROUP W_EPOCH W_VALUE W_EXTRA "
        "F_KIND_MASK F_SPACE_SHIFT F_KNOWN_SHIFT F_READS_SHIFT F_SIZE_SHIFT F_VAR_SHIFT "
        "F_EVENT_SHIFT F_BYTE_MASK F_EVENT_MASK KIND_EVENT FNV_OFFSET FNV_PRIME "
        "X_WEPOCH_SHIFT WEPOCH_MAX WARP_SIZE F_NAMED_SHIFT NAMED_OPS_MASK NAMED_MAX "
        "NAMED_SPAN_SHIFT NAMED_UNIT NAMED_SPANS F_GRID_SHIFT GPHASE_SHIFT GPHASE_MAX "
        "EPOCH_LOW_MAX F_ASYNC_SHIFT F_OWNC_SHIFT OWN_SEQ_SHIFT OWN_SEQ_MOD OWN_FLIGHT_MASK "
        "EV_ORDER O_READ O_WRITE O_WUNKNOWN O_BARRIERS_SHIFT O_BARRIERS_MAX"
    ).split(),
    "control": (
        "CTL_REQUESTED CTL_CAPACITY CTL_LO CTL_HI CTL_NBINS CTL_BINW CTL_ORDER CTL_BASES "
        "ORDER_EVENTS ORDER_VAR_LAST "
        "EVENT_SLOTS EV_ORDINALS EV_ORDINAL_SHIFT EV_SITE_SHIFT EV_ORDINAL_LIMIT EV_ID_LIMIT "
        "EV_LID_MASK WGSL_EVENT_SLOTS WGSL_EXIT_SLOT SYNC_W_REQUESTED SYNC_W_CAPACITY SYNC_HEAD "
        "NAMED_GROUPS NAMED_IDS NAMED_WORDS NAMED_AREA_WORDS "
        "COPY_TABLE COPY_SHORT_WAIT COPY_FULL COPY_N_SHIFT COPY_M_SHIFT COPY_COUNT_MASK "
        "OOB_SLOTS OOB_INDEX OOB_BOUND OOB_DEPTH OOB_UNIT OOB_ELEMENTS OOB_BYTES UNINIT_SLOTS"
    ).split(),
    "shadow": (
        "SHADOW_HEAD SHD_MODE SHD_WORDS SHD_WGSIZE SHD_UNSEEN SHD_LWORDS SHD_LGROUPS SHD_LOFF "
        "SHD_LOCAL_OOB SHD_CONFLICT CONFLICT_SEEN CONFLICT_SEARCH "
        "SHADOW_OFF SHADOW_BUILD SHADOW_FILTER PAIR_WORDS MULTI ACC_THEN_STORE "
        "KB_LOAD KB_STORE KB_ATOMIC LS_MULTI LS_KIND_SHIFT LS_EPOCH_SHIFT MASK_EPOCHS"
    ).split(),
    "analysis": (
        "NONE ENTRY_WORDS BUCKET_WORDS RACE_WORDS INSTANCE_WORDS DENSE_EVENTS MAXE MAXK "
        "PARAM_WORDS P_N_RECORDS P_ECAP P_BCAP P_RCAP P_UNIFORM_RACE P_PHASE P_N_ITEMS P_ROW "
        "P_LO P_HI P_WGSIZE P_SWORDS P_DGROUPS P_ALL_CAP P_L_LEN P_WORK_LEN "
        "C_E_FULL C_B_FULL C_R_FULL C_LIVE C_RACY C_BUCKET_FULL C_SITE_RANGE C_LIST_FULL "
        "C_NEED_ENTRIES C_NEED_EVENTS C_WORK "
        "E_OWNER E_COUNT E_AMIN E_AMAX E_VMIN E_VMAX E_UNKNOWN E_NEXT E_LMIN E_LMAX "
        "B_OWNER B_HEAD B_X0 B_X1 B_X2 B_X3 R_KEY R_INST R_PLO R_PHI R_O1 R_O2 R_O3 R_EX "
        "EX_WORDS T_LOCAL T_INTRA T_INTER T_BARRIER T_EXIT "
        "RK_CLASS_SHIFT RK_KIND_A_SHIFT RK_KIND_B_SHIFT RK_SITE_A_SHIFT RK_SITE_LIMIT "
        "VH0 H_NSEG H_NRUNS H_LOCAL H_SLOTS H_TH H_ORD H_SB H_STAMP H_SEG H_VC H_PAIRS H_NLOC "
        "H_LK H_LKP H_LBANK H_WORDS "
        "SB_WORDS SCAN_ITEM_WORDS SLOT_WORDS"
    ).split(),
    "hash": ["HASH_GOLDEN", "HASH_LANE_B", "HASH_WORKGROUP"],
}

# The runtimes' prefix: their names live in the user's program.
RUNTIME_PREFIX = "_GR_"
RUNTIME_GROUPS = ("record", "control", "shadow")


def runtime_wgsl(nv: int) -> str:
    """The ABI constants a WGSL runtime of a module with `nv` tracked variables uses."""
    return wgsl_consts(RUNTIME_GROUPS, RUNTIME_PREFIX, per_kernel(nv))


def runtime_c(nv: int) -> str:
    """The ABI #defines an OpenCL C runtime of a program with `nv` tracked variables uses."""
    return c_defines(RUNTIME_GROUPS, RUNTIME_PREFIX, per_kernel(nv))


def values(groups: Sequence[str]) -> dict[str, int]:
    """Name -> value of every constant of `groups` (in order)."""
    g = globals()
    return {name: int(g[name]) for group in groups for name in GROUPS[group]}


def _value(v: int) -> str:
    return f"{v:#x}" if v > 0xFFFF else str(v)


def _header(groups: Sequence[str], line: str, prefix: str, extra: dict[str, int] | None) -> str:
    pairs = {**values(groups), **(extra or {})}
    body = "".join(line.format(name=prefix + n, value=_value(v)) for n, v in pairs.items())
    return f"// generated from gpurace/abi.py: do not edit, do not redefine\n{body}"


def wgsl_consts(
    groups: Sequence[str], prefix: str = "", extra: dict[str, int] | None = None
) -> str:
    """WGSL ``const`` declarations of `groups` (and of `extra`: per-kernel values)."""
    return _header(groups, "const {name}: u32 = {value}u;\n", prefix, extra)


def c_defines(groups: Sequence[str], prefix: str = "", extra: dict[str, int] | None = None) -> str:
    """C ``#define``s of `groups` (and of `extra`: per-kernel values)."""
    return _header(groups, "#define {name} {value}u\n", prefix, extra)
