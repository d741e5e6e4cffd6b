"""WGSL text of the logging runtime and of the per-access helper functions.

Every instrumented access is replaced, in place, by a call to a generated helper
function that logs the access and then performs it. Because a call is an
ordinary expression, the rewrite never moves code: evaluation order, short
circuits and loop conditions stay exactly as written, and index expressions are
evaluated once (as the helper's arguments).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpurace.model import Event, Kind, Space, pack_flags

from .types import (
    Array,
    Atomic,
    Matrix,
    Scalar,
    Struct,
    Type,
    Vector,
    column_stride,
    size_of,
    stride_of,
    wgsl,
)

FNV_OFFSET = 2166136261
FNV_PRIME = 16777619
SWIZZLE = {"x": 0, "y": 1, "z": 2, "w": 3, "r": 0, "g": 1, "b": 2, "a": 3}
BARRIER_EXTRA = {"workgroupBarrier": 1, "storageBarrier": 2, "textureBarrier": 0}


@dataclass
class TrackedInfo:
    """A tracked module variable: a ``var<storage>`` or ``var<workgroup>``."""

    id: int
    name: str
    space: Space
    type: Type
    access: str
    lw0: int = 0  # workgroup variables: first word in the group's local order
    lwn: int = 0  # workgroup variables: words in the local order (ceil(size / 4))


@dataclass
class Step:
    """One step of an access path below its root variable."""

    kind: str  # "member", "comp" (vector component) or "index"
    text: str  # member/component name, or the index expression (call-site text)
    offset: int = 0  # static byte offset of a member/component/constant index
    stride: int = 0  # bytes per index step
    itype: str = ""  # i32/u32 for a dynamic index, "" for a constant one


@dataclass
class Path:
    """A reference into a tracked variable: root + member/component/index steps."""

    root: TrackedInfo
    steps: list[Step] = field(default_factory=list)
    type: Type | None = None  # store type of the referenced memory

    def dynamic(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "index" and s.itype]

    def copy(self) -> Path:
        return Path(self.root, [Step(**vars(s)) for s in self.steps], self.type)

    def shape(self) -> tuple:
        """Identity of the path with dynamic index texts abstracted away."""
        return (self.root.name,) + tuple(
            (s.kind, s.itype or s.text, s.offset, s.stride) for s in self.steps
        )


def local_order(sizes: list[int]) -> tuple[list[int], int]:
    """The local order of a module's workgroup variables of `sizes` bytes (in id
    order): each one's first word `lw0`, and the words `L` of the order. Each
    variable starts at a whole word (backends/prefilter.py); the rewriter emits the
    `lw0` constants and the backend sizes the shadow's local area with `L`."""
    firsts, total = [], 0
    for size in sizes:
        firsts.append(total)
        total += -(-size // 4)
    return firsts, total


def prelude(nvars: int, log_exits: bool = True) -> str:
    """Private state, the prologue ``_gr_init`` and the record appender ``_gr_rec``.

    ``_gr_ctl`` (docs/internals.md §1): [0] records requested, [1] capacity,
    [2]/[3] the address range [lo, hi) to log, [4]/[5] histogram bins and bin width
    (a counting run when bins > 0), [6 + var] each variable's base in the linear
    address order, then the bins. An access is logged only if a 4-byte word it
    touches lies in the range; events if the work-group's linear id does.
    """
    n = max(1, nvars)  # the private array needs at least one element
    bases = "\n".join(f"  _gr_base[{v}] = _gr_par[{6 + v}];" for v in range(nvars))
    return f"""\
const _GR_LOG_EXITS: bool = {"true" if log_exits else "false"};
var<private> _gr_lid: u32;
var<private> _gr_grp: u32;
var<private> _gr_cap: u32;
var<private> _gr_lo: u32;
var<private> _gr_hi: u32;
var<private> _gr_nbins: u32;
var<private> _gr_binw: u32;
var<private> _gr_base: array<u32, {n}>;
var<private> _gr_ep_l: u32;
var<private> _gr_ep_g: u32;
var<private> _gr_nbar: u32;
var<workgroup> _gr_evs: array<atomic<u32>, 5>;
// Which run this is, fixed when the pipeline is made (docs/internals.md §2) so
// that the driver compiles only that run's code (lavapipe executes both sides of
// every branch under a lane mask): 0 log every access in the range, 1 build the
// shadow, 2 log what the shadow lets through; _gr_count: a counting run.
override _gr_mode: u32 = 0u;
override _gr_count: bool = false;
// The shadow's per-group local area: 0 none (local accesses use the launch-wide
// pairs), 1 it covers every group, 2 only groups below _gr_lgroups (a run-time test).
override _gr_lmode: u32 = 0u;
var<private> _gr_swords: u32;
var<private> _gr_wgs: u32;
var<private> _gr_lwords: u32;
var<private> _gr_lgroups: u32;
var<private> _gr_loff: u32;
var<private> _gr_loob: u32;

fn _gr_init(l: u32, w: vec3<u32>, n: vec3<u32>) {{
  _gr_lid = l;
  _gr_grp = w.x + n.x * (w.y + n.y * w.z);
  // plain loads from the read-only copy: an atomic load per work-item and word
  // costs more than a small kernel itself on lavapipe
  _gr_cap = _gr_par[1];
  _gr_lo = _gr_par[2];
  _gr_hi = _gr_par[3];
  _gr_nbins = _gr_par[4];
  _gr_binw = max(1u, _gr_par[5]);
{bases}
  _gr_ep_l = 0u;
  _gr_ep_g = 0u;
  _gr_nbar = 0u;
  _gr_swords = _gr_par[{7 + nvars}];
  _gr_wgs = _gr_par[{8 + nvars}];
  _gr_lwords = _gr_par[{9 + nvars}];
  _gr_lgroups = _gr_par[{10 + nvars}];
  _gr_loff = _gr_par[{11 + nvars}];
  if _gr_mode == 2u && _gr_lmode != 0u {{
    _gr_loob = atomicLoad(&_gr_shd[7]);  // the build run saw a local access out of bounds
  }}
}}

// Whether this work-item logs its event (barrier ordinal or exit, at `site`): not
// when a work-item of its group with a lower local index logged the same (kind,
// ordinal, site), since the analysis keeps only the lowest local index of each
// (docs/internals.md §1). Slot `slot` (ordinal % 4 for barriers, 4 for exits)
// holds the latest (ordinal + 1, site, local index) claimed there; ordinals from
// 255, sites or local indices from 4096 are always logged.
fn _gr_ev_new(slot: u32, ordinal: u32, site: u32) -> bool {{
  var fresh = true;
  if ordinal < 255u && site < 4096u && _gr_lid < 4096u {{
    let mine = ((ordinal + 1u) << 24u) | (site << 12u) | _gr_lid;
    var cur = atomicLoad(&_gr_evs[slot]);
    loop {{
      if (cur >> 12u) == (mine >> 12u) && (cur & 0xfffu) < _gr_lid {{
        fresh = false;
        break;
      }}
      let res = atomicCompareExchangeWeak(&_gr_evs[slot], cur, mine);
      if res.exchanged {{ break; }}
      cur = res.old_value;
    }}
  }}
  return fresh;
}}

// The launch-wide shadow (docs/internals.md §2), a word pair (actor, kinds) per
// 4 bytes of the linear address order. Mode 1 marks the words an access touches
// (nothing is logged); mode 2 says whether the access touches a word where a
// conflict is possible or one the shadow does not cover (only those accesses are
// logged), and counts in [3] the words this run touches in a way mode 1 did not see.
fn _gr_shadow(flags: u32, first: u32, last: u32) -> bool {{
  let bit = 1u << (flags & 3u);
  var actor = _gr_lid + 1u;
  if ((flags >> 2u) & 1u) == 0u {{
    actor = _gr_grp * _gr_wgs + _gr_lid + 1u;
  }}
  var needed = false;
  var unseen = false;
  let n = (last - first) / 4u + 1u;
  for (var k = 0u; k < n; k++) {{
    let i = first / 4u + k;
    if i >= _gr_swords {{
      needed = true;
      if _gr_mode == 1u {{
        atomicStore(&_gr_shd[0], 0xffffffffu);  // a word beyond the shadow: see [0]
      }}
      continue;
    }}
    let s = 8u + 2u * i;  // after the SHADOW_HEAD header (backends/prefilter.py)
    if _gr_mode == 1u {{
      if (atomicLoad(&_gr_shd[s + 1u]) & bit) == 0u {{
        atomicOr(&_gr_shd[s + 1u], bit);
      }}
      var cur = atomicLoad(&_gr_shd[s]);
      loop {{
        if cur == actor || cur == 0xffffffffu {{ break; }}
        if cur != 0u {{
          atomicStore(&_gr_shd[s], 0xffffffffu);
          break;
        }}
        let res = atomicCompareExchangeWeak(&_gr_shd[s], 0u, actor);
        if res.exchanged {{ break; }}
        cur = res.old_value;
      }}
    }} else {{
      let who = atomicLoad(&_gr_shd[s]);
      let kinds = atomicLoad(&_gr_shd[s + 1u]);
      if who == 0xffffffffu && ((kinds & 2u) != 0u || (kinds & 5u) == 5u) {{
        needed = true;
      }} else if (who != actor && who != 0xffffffffu) || (kinds & bit) == 0u {{
        unseen = true;
      }}
    }}
  }}
  if unseen {{
    atomicAdd(&_gr_shd[3], 1u);
  }}
  return needed;
}}

// The local area's state machine (docs/internals.md §2) for state word `i` and an
// access `mine` (epoch & 0xffff << 16 | kind bit << 13 | actor): whether the word's
// bucket (group, word, local epoch) may hold a conflict (several actors, and a
// store or atomics beside plain accesses: the analysis' own `mark` test). A state
// of a newer epoch (out of order: barrier divergence) is left alone: "may conflict".
//
// One atomicMax does the common cases in one atomic (lavapipe runs every atomic
// lane by lane): an empty state or one of an older epoch becomes `mine`; one of a
// newer epoch stays. In the same epoch it may have replaced the state by `mine`, so
// a compare-exchange loop writes the merge of both (actor: equal, else several;
// kinds: or) and of whatever other work-items merged meanwhile; whoever writes a
// state has computed it, so the state that stays is one its writer tested. Epochs
// compare as 16-bit numbers: past 65535 barriers every state looks newer
// (conservative, like out of order).
fn _gr_lmerge(cur: u32, mine: u32) -> u32 {{
  var actor = cur & 0x1fffu;
  if actor != (mine & 0x1fffu) {{
    actor = 0x1fffu;
  }}
  return (cur & 0xffffe000u) | (mine & 0xe000u) | actor;
}}

fn _gr_lstate(i: u32, mine: u32) -> bool {{
  let old = atomicMax(&_gr_shd[i], mine);
  var next = mine;
  if old != 0u && (old >> 16u) == (mine >> 16u) {{
    next = _gr_lmerge(old, mine);
    var cur = max(old, mine);
    loop {{
      if next == cur {{ break; }}
      let res = atomicCompareExchangeWeak(&_gr_shd[i], cur, next);
      if res.exchanged {{ break; }}
      cur = res.old_value;
      if (cur >> 16u) != (mine >> 16u) {{
        return true;  // a newer epoch meanwhile (out of order)
      }}
      next = _gr_lmerge(cur, next);
    }}
  }} else if old > mine {{
    return true;
  }}
  let k = next & 0xe000u;  // a store, or an atomic beside a load or a store
  let mixed = (k & 0x4000u) != 0u || ((k & 0x8000u) != 0u && k != 0x8000u);
  return (next & 0x1fffu) == 0x1fffu && mixed;
}}

// A workgroup-memory access of a group the local area covers, at byte `off` of a
// variable whose words are [lw0, lw0 + lwn) of the local order. Mode 1 updates the
// states and sets bit (epoch % 32) of the mask of each word whose bucket may hold a
// conflict; mode 2 updates the states the same way, counts in [3] a bucket that may
// conflict whose bit the build run did not set, and says whether a word's bit is
// set (the access is logged). An access beyond its variable is always logged (the
// analysis may see it alias another variable's word): a build run says so in [7],
// and then filter runs log every local access; a filter run that meets one the
// build run did not counts it in [3].
fn _gr_local(flags: u32, off: u32, epoch: u32, lw0: u32, lwn: u32) -> bool {{
  let w0 = off / 4u;
  let w1 = (off + ((flags >> 8u) & 0xffu) - 1u) / 4u;
  if w0 >= lwn || w1 >= lwn {{
    if _gr_mode == 1u {{
      atomicStore(&_gr_shd[7], 1u);
    }} else if _gr_loob == 0u {{
      atomicAdd(&_gr_shd[3], 1u);
    }}
    return true;
  }}
  if _gr_mode == 2u && _gr_loob != 0u {{
    return true;
  }}
  let actor = min(_gr_lid + 1u, 0x1fffu);
  let mine = ((epoch & 0xffffu) << 16u) | (0x2000u << (flags & 3u)) | actor;
  let bit = 1u << (epoch & 31u);
  let row = _gr_loff + _gr_grp * _gr_lwords + lw0;
  let masks = _gr_lgroups * _gr_lwords;
  var needed = false;
  for (var w = w0; w <= w1; w++) {{
    let s = row + w;
    if _gr_lstate(s, mine) {{
      needed = true;
      if _gr_mode == 1u {{
        if (atomicLoad(&_gr_shd[s + masks]) & bit) == 0u {{
          atomicOr(&_gr_shd[s + masks], bit);
        }}
      }} else if (atomicOr(&_gr_shd[s + masks], bit) & bit) == 0u {{
        atomicAdd(&_gr_shd[3], 1u);
      }}
    }} else if _gr_mode == 2u && (atomicLoad(&_gr_shd[s + masks]) & bit) != 0u {{
      needed = true;
    }}
  }}
  return needed;
}}

fn _gr_rec(
  site: u32, flags: u32, off: u32, epoch: u32, value: u32, extra: u32, lw0: u32, lwn: u32
) {{
  var keep = _gr_grp >= _gr_lo && _gr_grp < _gr_hi;
  var at = _gr_grp;
  if (flags & 3u) != 3u {{
    let base = _gr_base[(flags >> 16u) & 0xffu];
    let first = base + (off & ~3u);
    let last = base + ((off + ((flags >> 8u) & 0xffu) - 1u) & ~3u);
    keep = first < _gr_hi && last >= _gr_lo;
    at = max(first, _gr_lo);
    if _gr_mode != 0u && _gr_lmode != 0u && ((flags >> 2u) & 1u) != 0u
        && (_gr_lmode == 1u || _gr_grp < _gr_lgroups) {{
      // every run updates the states of every access (whatever the range), so that
      // each run's states are the build run's
      keep = _gr_local(flags, off, epoch, lw0, lwn) && keep && _gr_mode == 2u;
    }} else if _gr_mode != 0u && (keep || _gr_mode == 1u) {{
      keep = _gr_shadow(flags, first, last) && _gr_mode == 2u;
    }}
  }}
  if keep && _gr_count {{
    // a counting run: how many records each address bin of the range would log
    let bin = min((at - _gr_lo) / _gr_binw, _gr_nbins - 1u);
    atomicAdd(&_gr_ctl[6u + {nvars}u + bin], 1u);
    return;
  }}
  if keep {{
    let i = atomicAdd(&_gr_ctl[0], 1u);
    if i < _gr_cap {{
      let b = i * 8u;
      _gr_log[b] = site;
      _gr_log[b + 1u] = flags;
      _gr_log[b + 2u] = off;
      _gr_log[b + 3u] = _gr_lid;
      _gr_log[b + 4u] = _gr_grp;
      _gr_log[b + 5u] = epoch;
      _gr_log[b + 6u] = value;
      _gr_log[b + 7u] = extra;
    }}
  }}
}}

"""


FNV_HELPER = f"""\
// FNV-1a over the low n bytes of w (little-endian), continuing from hash h.
fn _gr_fnv(h: u32, w: u32, n: u32) -> u32 {{
  var x = h;
  for (var b = 0u; b < n; b++) {{
    x = (x ^ ((w >> (8u * b)) & 0xffu)) * {FNV_PRIME}u;
  }}
  return x;
}}
"""


def log_bindings(group: int) -> str:
    return (
        f"@group({group}) @binding(0) var<storage, read_write> _gr_log: array<u32>;\n"
        f"@group({group}) @binding(1) var<storage, read_write> _gr_ctl: array<atomic<u32>>;\n"
        f"@group({group}) @binding(2) var<storage, read_write> _gr_shd: array<atomic<u32>>;\n"
        f"@group({group}) @binding(3) var<storage, read> _gr_par: array<u32>;\n"
    )


@dataclass
class Off:
    """A byte-offset expression: constant + sum of u32 terms."""

    const: int = 0
    terms: tuple[str, ...] = ()

    def plus(self, c: int = 0, term: str | None = None) -> Off:
        return Off(self.const + c, self.terms + ((term,) if term else ()))

    def text(self) -> str:
        parts = list(self.terms)
        if self.const or not parts:
            parts.append(f"{self.const}u")
        return " + ".join(parts)


def _words(t: Scalar | Vector, v: str) -> list[tuple[str, int]]:
    """The stored value as (u32 expression, byte count) words, little-endian."""
    s = t if isinstance(t, Scalar) else t.elem
    n = 1 if isinstance(t, Scalar) else t.n
    if s.name == "f16":
        if n == 1:
            return [(f"pack2x16float(vec2<f32>(f32({v}), 0.0))", 2)]
        out = []
        comps = "xyzw"[:n]
        for k in range(0, n, 2):
            pair = comps[k : k + 2]
            if len(pair) == 2:
                out.append((f"pack2x16float(vec2<f32>(({v}).{pair}))", 4))
            else:
                out.append((f"pack2x16float(vec2<f32>(f32(({v}).{pair}), 0.0))", 2))
        return out
    if s.name in ("i64", "u64"):  # low word first (little-endian)
        u = (lambda x: x) if s.name == "u64" else (lambda x: f"bitcast<u64>({x})")
        comps = [v] if n == 1 else [f"({v}).{c}" for c in "xyzw"[:n]]
        return [(f"u32({u(c)} {op})", 4) for c in comps for op in ("& 0xfffffffflu", ">> 32u")]
    if s.name == "bool":
        if n == 1:
            return [(f"select(0u, 1u, {v})", 4)]
        return [(f"select(0u, 1u, ({v}).{c})", 4) for c in "xyzw"[:n]]
    conv = (lambda x: x) if s.name == "u32" else (lambda x: f"bitcast<u32>({x})")
    if n == 1:
        return [(conv(v), 4)]
    return [(conv(f"({v}).{c}"), 4) for c in "xyzw"[:n]]


def value_bits(t: Scalar | Vector, v: str) -> str:
    """Word 6 of a store record: the bits if <= 4 bytes, else FNV-1a of the bytes."""
    words = _words(t, v)
    if sum(n for _, n in words) <= 4:
        return words[0][0]
    h = f"{FNV_OFFSET}u"
    for w, n in words:
        h = f"_gr_fnv({h}, {w}, {n}u)"
    return h


def _plain(t: Type | None) -> Type | None:
    """The value type of a plain access (naga loads/stores an atomic as its scalar)."""
    return t.elem if isinstance(t, Atomic) else t


class Runtime:
    """Generates (and de-duplicates) the helper functions of one module."""

    def __init__(self) -> None:
        self._by_body: dict[str, str] = {}
        self.decls: list[str] = []
        self._n = 0

    def _add(self, prefix: str, params: list[str], ret: str | None, body: list[str]) -> str:
        sig_tail = f" -> {ret}" if ret else ""
        key = prefix + "|" + ", ".join(params) + sig_tail + "\n" + "\n".join(body)
        name = self._by_body.get(key)
        if name is None:
            name = f"{prefix}{self._n}"
            self._n += 1
            self._by_body[key] = name
            lines = [f"fn {name}({', '.join(params)}){sig_tail} {{"]
            lines += ["  " + b for b in body]
            lines.append("}")
            self.decls.append("\n".join(lines))
        return name

    def add_private(self, decl: str) -> None:
        if decl not in self._by_body:
            self._by_body[decl] = decl
            self.decls.append(decl)

    # ------------------------------------------------------------------ paths
    @staticmethod
    def _params(path: Path) -> list[str]:
        return [f"_gr_i{k}: {s.itype}" for k, s in enumerate(path.dynamic())]

    @staticmethod
    def ref(path: Path, names: list[str] | None = None) -> str:
        """WGSL reference text of the path; dynamic indices named by ``names``."""
        text = path.root.name
        k = 0
        for s in path.steps:
            if s.kind in ("member", "comp"):
                text += "." + s.text
            elif s.itype:
                text += f"[{names[k] if names else f'_gr_i{k}'}]"
                k += 1
            else:
                text += f"[{s.text}]"
        return text

    @staticmethod
    def offset(path: Path, names: list[str] | None = None) -> Off:
        off = Off()
        k = 0
        for s in path.steps:
            if s.kind == "index" and s.itype:
                name = names[k] if names else f"_gr_i{k}"
                idx = name if s.itype == "u32" else f"u32({name})"
                off = off.plus(term=f"{idx} * {s.stride}u" if s.stride != 1 else idx)
                k += 1
            else:
                off = off.plus(s.offset)
        return off

    # ------------------------------------------------------------------ records
    @staticmethod
    def _rec(
        site: int, kind: Kind, path: Path, size: int, off: Off, value: str | None, extra: int = 0
    ) -> str:
        root = path.root
        flags = pack_flags(int(kind), int(root.space), size, root.id, value is not None)
        epoch = "_gr_ep_l" if root.space == Space.LOCAL else "_gr_ep_g"
        local = f"{root.lw0}u, {root.lwn}u"
        return (
            f"_gr_rec({site}u, {flags}u, {off.text()}, {epoch}, {value or '0u'}, {extra}u, "
            f"{local});"
        )

    def _leaves(
        self,
        site: int,
        kind: Kind,
        path: Path,
        t: Type,
        off: Off,
        value: str | None,
        depth: int = 0,
    ) -> list[str]:
        """One record per scalar/vector/matrix-column leaf; fixed arrays as loops."""
        if isinstance(t, Scalar | Vector):
            v = value_bits(t, value) if value is not None else None
            return [self._rec(site, kind, path, size_of(t), off, v)]
        if isinstance(t, Atomic):  # a plain access to an atomic (a naga extension)
            v = value_bits(t.elem, value) if value is not None else None
            return [self._rec(site, kind, path, 4, off, v)]
        if isinstance(t, Matrix):
            out = []
            cs = column_stride(t)
            for c in range(t.cols):
                cv = f"({value})[{c}]" if value is not None else None
                out += self._leaves(site, kind, path, t.column, off.plus(c * cs), cv, depth)
            return out
        if isinstance(t, Struct):
            out = []
            for m in t.members:
                mv = f"({value}).{m.name}" if value is not None else None
                out += self._leaves(site, kind, path, m.type, off.plus(m.offset), mv, depth)
            return out
        if isinstance(t, Array) and t.count is not None:
            k = f"_gr_k{depth}"
            ev = f"({value})[{k}]" if value is not None else None
            inner = self._leaves(
                site, kind, path, t.elem, off.plus(term=f"{k} * {stride_of(t)}u"), ev, depth + 1
            )
            return (
                [f"for (var {k} = 0u; {k} < {t.count}u; {k}++) {{"]
                + ["  " + line for line in inner]
                + ["}"]
            )
        raise ValueError(f"cannot log an access of type {wgsl(t)}")

    # ------------------------------------------------------------------ helpers
    def load(self, site: int, path: Path) -> str:
        body = self._leaves(site, Kind.LOAD, path, path.type, self.offset(path), None)
        body.append(f"return {self.ref(path)};")
        return self._add("_gr_ld", self._params(path), wgsl(_plain(path.type)), body)

    def swizzle_load(self, site: int, path: Path, swizzle: str) -> str:
        vt = path.type
        assert isinstance(vt, Vector)
        es = size_of(vt.elem)
        comps = sorted({SWIZZLE[c] for c in swizzle})
        runs: list[list[int]] = []
        for c in comps:
            if runs and runs[-1][-1] == c - 1:
                runs[-1].append(c)
            else:
                runs.append([c])
        off = self.offset(path)
        body = [
            self._rec(site, Kind.LOAD, path, es * len(r), off.plus(r[0] * es), None) for r in runs
        ]
        body.append(f"return {self.ref(path)}.{swizzle};")
        ret = Vector(len(swizzle), vt.elem)
        return self._add("_gr_ld", self._params(path), wgsl(ret), body)

    def store(self, site: int, path: Path) -> str:
        body = self._leaves(site, Kind.STORE, path, path.type, self.offset(path), "_gr_v")
        body.append(f"{self.ref(path)} = _gr_v;")
        params = self._params(path) + [f"_gr_v: {wgsl(_plain(path.type))}"]
        return self._add("_gr_st", params, None, body)

    # A compound assignment ``e1 op= e2`` means ``let p = &e1; *p = *p op e2`` with e1
    # evaluated once: the load happens before e2 is evaluated, the store after. It is
    # rewritten as ``_gr_rsN(_gr_rlN(indices) op (e2))``: the load helper saves the
    # indices in private variables of its site, and the store helper reuses them.
    @staticmethod
    def _saved(site: int, path: Path) -> list[str]:
        return [f"_gr_s{site}_{k}_{s.itype}" for k, s in enumerate(path.dynamic())]

    def rmw_load(self, site: int, path: Path) -> str:
        names = self._saved(site, path)
        for name, s in zip(names, path.dynamic(), strict=True):
            self.add_private(f"var<private> {name}: {s.itype};")
        body = [f"{name} = _gr_i{k};" for k, name in enumerate(names)]
        body += self._leaves(site, Kind.LOAD, path, path.type, self.offset(path), None)
        body.append(f"return {self.ref(path)};")
        return self._add("_gr_rl", self._params(path), wgsl(_plain(path.type)), body)

    def rmw_store(self, load_site: int, store_site: int, path: Path) -> str:
        names = self._saved(load_site, path)
        off = self.offset(path, names)
        body = self._leaves(store_site, Kind.STORE, path, path.type, off, "_gr_v")
        body.append(f"{self.ref(path, names)} = _gr_v;")
        return self._add("_gr_rs", [f"_gr_v: {wgsl(_plain(path.type))}"], None, body)

    def atomic(self, site: int, path: Path, fn: str, op: int, args: list[Type]) -> str:
        at = path.type
        assert isinstance(at, Atomic)
        body = [self._rec(site, Kind.ATOMIC, path, 4, self.offset(path), None, op)]
        params = self._params(path) + [f"_gr_a{k}: {wgsl(t)}" for k, t in enumerate(args)]
        call = f"{fn}(&{self.ref(path)}" + "".join(f", _gr_a{k}" for k in range(len(args))) + ")"
        if fn == "atomicStore":
            body.append(call + ";")
            return self._add("_gr_at", params, None, body)
        body.append(f"return {call};")
        return self._add("_gr_at", params, wgsl(at.elem), body)

    def cas_save(self, site: int, k: int, itype: str) -> str:
        """Pass-through for index k of a compare-exchange: saves it for the log call."""
        var = f"_gr_c{site}_{k}_{itype}"
        self.add_private(f"var<private> {var}: {itype};")
        body = [f"{var} = _gr_i;", "return _gr_i;"]
        return self._add("_gr_sv", [f"_gr_i: {itype}"], itype, body)

    def cas_log(self, site: int, path: Path, cmp: Type) -> str:
        """Pass-through for the compare value: logs the atomic using the saved indices."""
        names = [f"_gr_c{site}_{k}_{s.itype}" for k, s in enumerate(path.dynamic())]
        rec = self._rec(site, Kind.ATOMIC, path, 4, self.offset(path, names), None, 11)
        return self._add("_gr_cas", [f"_gr_c: {wgsl(cmp)}"], wgsl(cmp), [rec, "return _gr_c;"])

    def barrier_rec(self, site: int, extra: int) -> str:
        flags = pack_flags(int(Kind.EVENT), 0, 0, 0, False, int(Event.BARRIER))
        return (
            f"if _gr_ev_new(_gr_nbar & 3u, _gr_nbar, {site}u) "
            f"{{ _gr_rec({site}u, {flags}u, 0u, _gr_nbar, 0u, {extra}u, 0u, 0u); }}"
        )

    def barrier(self, site: int, fn: str) -> str:
        extra = BARRIER_EXTRA[fn]
        body = [self.barrier_rec(site, extra), f"{fn}();"]
        if extra & 1:
            body.append("_gr_ep_l += 1u;")
        if extra & 2:
            body.append("_gr_ep_g += 1u;")
        body.append("_gr_nbar += 1u;")
        return self._add("_gr_bar", [], None, body)

    def uniform_load(self, bar_site: int, load_site: int, path: Path) -> str:
        body = [
            self.barrier_rec(bar_site, 1),
            f"let _gr_v = workgroupUniformLoad(&{self.ref(path)});",
            "_gr_ep_l += 1u;",
            "_gr_nbar += 1u;",
        ]
        body += self._leaves(load_site, Kind.LOAD, path, path.type, self.offset(path), None)
        body.append("return _gr_v;")
        return self._add("_gr_wul", self._params(path), wgsl(path.type), body)

    def exit(self, site: int) -> str:
        flags = pack_flags(int(Kind.EVENT), 0, 0, 0, False, int(Event.EXIT))
        body = [
            f"if _GR_LOG_EXITS && _gr_ev_new(4u, _gr_nbar, {site}u) "
            f"{{ _gr_rec({site}u, {flags}u, 0u, _gr_nbar, 0u, 0u, 0u, 0u); }}"
        ]
        return self._add("_gr_exit", [], None, body)
