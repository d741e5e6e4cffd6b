"""WGSL text of the logging runtime and of the per-access helper functions.

Every instrumented access is replaced, in place, by a call to a generated helper
function that logs the access and then performs it. Because a call is an
ordinary expression, the rewrite never moves code: evaluation order, short
circuits and loop conditions stay exactly as written, and index expressions are
evaluated once (as the helper's arguments).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpurace import abi, shaders
from gpurace.model import Event, Kind, Space, pack_flags

from .bounds import OutOfBoundsKeys
from .initcheck import UninitReads
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

FNV_OFFSET = abi.FNV_OFFSET
SWIZZLE = {"x": 0, "y": 1, "z": 2, "w": 3, "r": 0, "g": 1, "b": 2, "a": 3}
BARRIER_EXTRA = {"workgroupBarrier": 1, "storageBarrier": 2, "textureBarrier": 0}


def elided(info: TrackedInfo) -> bool:
    """Whether the prefilter's build and filter runs leave `info`'s accesses untracked
    (docs/internals.md §2, "Read-only elision"): a `var<storage, read>` buffer, which
    the shader cannot write and which WebGPU cannot bind over a writable binding of
    the same dispatch (`gpurace.launch.alias.check_alias_usage` refuses such a launch
    first), so no access of the launch writes it and none of its loads can race."""
    return info.space == Space.GLOBAL and info.access == "read"


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
    lb: int = 0  # workgroup variables whose states are banked (banked.py): first word + 1
    # initcheck (docs/memcheck.md): 0 not checked; a workgroup variable's written-shadow
    # words per group (abi.written_stride: bitmap and fill count); -1 a storage
    # buffer's (one shadow)
    written: int = 0


@dataclass
class Step:
    """One step of an access path below its root variable."""

    kind: str  # "member", "comp" (vector component) or "index"
    text: str  # member/component name, or the index expression (call-site text)
    offset: int = 0  # static byte offset of a member/component/constant index
    stride: int = 0  # bytes per index step
    itype: str = ""  # i32/u32 for a dynamic index, "" for a constant one
    # an index the kernel checks before the access (docs/memcheck.md): the WGSL
    # expression of the indexed dimension's size; "" when it is in range statically
    bound: str = ""


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


# The workgroup memory the banked local states (shaders/lbank.wgsl) may take beside
# the module's own: WebGPU's least `maxComputeWorkgroupStorageSize` less a margin for
# the runtime's other workgroup words (`_gr_evs`).
BANK_BUDGET = 16384 - 256


def bank_fits(local_words: int, bank_words: int) -> bool:
    """Whether two banks of `bank_words` states (``var<workgroup>``) fit beside a
    module's own `local_words` workgroup words (else its states live in the shadow)."""
    return 4 * local_words + 8 * bank_words <= BANK_BUDGET


def prelude(nvars: int, log_exits: bool = True, banked: list[TrackedInfo] | None = None) -> str:
    """The logging runtime of a module with `nvars` tracked variables: the ABI's
    constants, this module's own part, then ``shaders/runtime.wgsl`` (private state,
    the prologue ``_gr_init``, the record appender ``_gr_rec``, the prefilter's
    shadows and ``_gr_fnv``).

    ``_gr_ctl`` (docs/internals.md §1): [0] records requested, [1] capacity,
    [2]/[3] the address range [lo, hi) to log, [4]/[5] histogram bins and bin width
    (a counting run when bins > 0), [6 + var] each variable's base in the linear
    address order, then (gpurace/abi.py) the bins. An access is logged only if a
    4-byte word it touches lies in the range; events if the work-group's linear id
    does.
    """
    chosen = banked or []
    bank = sum(info.lwn for info in chosen)
    # each banked variable's bank words, mapped to its local words (shaders/lbank.wgsl)
    lword = "".join(
        f"  if w < {info.lb - 1 + info.lwn}u {{ return w - {info.lb - 1}u + {info.lw0}u; }}\n"
        for info in chosen
    )
    bases = "".join(f"  _gr_base[{v}] = _gr_par[_GR_CTL_BASES + {v}u];\n" for v in range(nvars))
    own = (
        f"const _GR_LOG_EXITS: bool = {'true' if log_exits else 'false'};\n"
        # the private array of bases needs at least one element
        f"const _GR_NBASES: u32 = {max(1, nvars)}u;\n"
        f"const _GR_LBANK: u32 = {bank}u;\n"
        f"const _GR_LBANK_SIZE: u32 = {max(1, 2 * bank)}u;\n"
        f"fn _gr_load_bases() {{\n{bases}}}\n"
        f"fn _gr_lword(w: u32) -> u32 {{\n{lword}  return w;\n}}\n"
    )
    return abi.runtime_wgsl(nvars) + own + shaders.text("runtime.wgsl") + shaders.text("lbank.wgsl")


def log_bindings(group: int) -> str:
    """The runtime's four bindings; the log as `vec4<u32>`s, two a record, so that
    `_gr_rec` writes a record in two stores (shaders/runtime.wgsl)."""
    return (
        f"@group({group}) @binding(0) var<storage, read_write> _gr_log: array<vec4<u32>>;\n"
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
        words = [v] if n == 1 else [f"({v}).{c}" for c in "xyzw"[:n]]
        return [(f"u32({u(c)} {op})", 4) for c in words for op in ("& 0xfffffffflu", ">> 32u")]
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
        # initcheck's read keys; None in a module with no checked variable
        self.uninit: UninitReads | None = None
        # checked workgroup variables known filled where the rewriter now is
        # (filled.py): their accesses and barriers get no shadow statements
        self.filled: frozenset[int] = frozenset()
        self.oob = OutOfBoundsKeys()  # the bounds checks' keys (bounds.py)

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

    # ------------------------------------------------------------------ bounds
    def guards(
        self, site: int, kind: Kind, path: Path, leave: str, names: list[str] | None = None
    ) -> list[str]:
        """The bounds checks of an access (docs/memcheck.md), before it is logged or
        made: one compare per index whose bound is not known to hold; a failing one
        is counted for the out-of-bounds area (bounds.py: recorded where the invocation
        exits) and `leave`s the helper without the access (a read returns zero, a
        write is dropped)."""
        out = []
        k = 0
        root = path.root
        flags = pack_flags(int(kind), int(root.space), 0, root.id)
        for pos, s in enumerate(path.steps):
            if s.kind != "index":
                continue
            idx = ""
            if s.itype:
                name = names[k] if names else f"_gr_i{k}"
                k += 1
                idx = name if s.itype == "u32" else f"u32({name})"
            elif s.stride:
                idx = f"{s.offset // s.stride}u"
            if idx and s.bound:
                out.append(self.oob.guard(site, flags, pos, idx, s.bound, leave))
        return out

    # ------------------------------------------------------------------ records
    def _rec(
        self,
        site: int,
        kind: Kind,
        path: Path,
        size: int,
        off: Off,
        value: str | None,
        extra: int = 0,
    ) -> str:
        root = path.root
        flags = pack_flags(int(kind), int(root.space), size, root.id, value is not None)
        epoch = "_gr_ep_l" if root.space == Space.LOCAL else "_gr_ep_g"
        local = f"{root.lw0}u, {root.lwn}u, {root.lb}u"
        checks = ""  # a variable not checked: its helpers are as before initcheck
        if root.written and self.uninit is not None and root.id not in self.filled:
            checks = self.uninit.statements(site, kind, root, size, off.text(), extra)
        rec = (
            f"_gr_rec({site}u, {flags}u, {off.text()}, {epoch}, {value or '0u'}, {extra}u, "
            f"{local});"
        )
        if elided(root):  # only a run that logs every access logs it (_gr_mode: an override)
            rec = f"if _gr_mode == _GR_SHADOW_OFF {{ {rec} }}"
        return checks + rec

    def _leaves(
        self,
        site: int,
        kind: Kind,
        path: Path,
        t: Type | None,
        off: Off,
        value: str | None,
        depth: int = 0,
    ) -> list[str]:
        """One record per scalar/vector/matrix-column leaf; fixed arrays as loops (a
        path without a type, like any other, is a ValueError)."""
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
        ret = wgsl(_plain(path.type))
        body = self.guards(site, Kind.LOAD, path, f"return {ret}();")
        body += self._leaves(site, Kind.LOAD, path, path.type, self.offset(path), None)
        body.append(f"return {self.ref(path)};")
        return self._add("_gr_ld", self._params(path), ret, body)

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
        ret = Vector(len(swizzle), vt.elem)
        body = self.guards(site, Kind.LOAD, path, f"return {wgsl(ret)}();")
        body += [
            self._rec(site, Kind.LOAD, path, es * len(r), off.plus(r[0] * es), None) for r in runs
        ]
        body.append(f"return {self.ref(path)}.{swizzle};")
        return self._add("_gr_ld", self._params(path), wgsl(ret), body)

    def store(self, site: int, path: Path) -> str:
        body = self.guards(site, Kind.STORE, path, "return;")
        body += self._leaves(site, Kind.STORE, path, path.type, self.offset(path), "_gr_v")
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
        ret = wgsl(_plain(path.type))
        body = [f"{name} = _gr_i{k};" for k, name in enumerate(names)]
        body += self.guards(site, Kind.LOAD, path, f"return {ret}();")
        body += self._leaves(site, Kind.LOAD, path, path.type, self.offset(path), None)
        body.append(f"return {self.ref(path)};")
        return self._add("_gr_rl", self._params(path), ret, body)

    def rmw_store(self, load_site: int, store_site: int, path: Path) -> str:
        names = self._saved(load_site, path)
        off = self.offset(path, names)
        body = self.guards(store_site, Kind.STORE, path, "return;", names)
        body += self._leaves(store_site, Kind.STORE, path, path.type, off, "_gr_v")
        body.append(f"{self.ref(path, names)} = _gr_v;")
        return self._add("_gr_rs", [f"_gr_v: {wgsl(_plain(path.type))}"], None, body)

    def atomic(self, site: int, path: Path, fn: str, op: int, args: list[Type]) -> str:
        at = path.type
        assert isinstance(at, Atomic)
        leave = "return;" if fn == "atomicStore" else f"return {wgsl(at.elem)}();"
        body = self.guards(site, Kind.ATOMIC, path, leave)
        body.append(self._rec(site, Kind.ATOMIC, path, 4, self.offset(path), None, op))
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
        # the call stays in place: an index out of bounds is reported, not redirected
        # (robustness keeps the real access inside the buffer; docs/memcheck.md)
        body = self.guards(site, Kind.ATOMIC, path, "return _gr_c;", names)
        return self._add(
            "_gr_cas", [f"_gr_c: {wgsl(cmp)}"], wgsl(cmp), [*body, rec, "return _gr_c;"]
        )

    def barrier_rec(self, site: int, extra: int) -> str:
        flags = pack_flags(int(Kind.EVENT), 0, 0, 0, False, int(Event.BARRIER))
        return (
            f"if _gr_ev_new(_gr_nbar % {abi.EV_ORDINALS}u, _gr_nbar, {site}u) "
            f"{{ _gr_rec({site}u, {flags}u, 0u, _gr_nbar, 0u, {extra}u, 0u, 0u, 0u); }}"
        )

    def barrier(self, site: int, fn: str) -> str:
        extra = BARRIER_EXTRA[fn]
        body = [self.barrier_rec(site, extra), f"{fn}();"]
        if extra & 1:
            body.append("_gr_ep_l += 1u;")
            body.append("_gr_lclear();")
            body += self.uninit.barrier(self.filled) if self.uninit is not None else []
        if extra & 2:
            body.append("_gr_ep_g += 1u;")
        body.append("_gr_nbar += 1u;")
        return self._add("_gr_bar", [], None, body)

    def uniform_load(self, bar_site: int, load_site: int, path: Path) -> str:
        body = [
            self.barrier_rec(bar_site, 1),
            f"let _gr_v = workgroupUniformLoad(&{self.ref(path)});",
            "_gr_ep_l += 1u;",
            "_gr_lclear();",
            "_gr_nbar += 1u;",
            *(self.uninit.barrier(self.filled) if self.uninit is not None else []),
        ]
        # after the barrier (which every work-item must reach): reported, and the
        # value (which robustness read inside the buffer) replaced by zero
        body += self.guards(load_site, Kind.LOAD, path, f"return {wgsl(path.type)}();")
        body += self._leaves(load_site, Kind.LOAD, path, path.type, self.offset(path), None)
        body.append("return _gr_v;")
        return self._add("_gr_wul", self._params(path), wgsl(path.type), body)

    def exit(self, site: int) -> str:
        flags = pack_flags(int(Kind.EVENT), 0, 0, 0, False, int(Event.EXIT))
        body = [
            f"if _GR_LOG_EXITS && _gr_ev_new({abi.WGSL_EXIT_SLOT}u, _gr_nbar, {site}u) "
            f"{{ _gr_rec({site}u, {flags}u, 0u, _gr_nbar, 0u, 0u, 0u, 0u, 0u); }}"
        ]
        if self.uninit is not None:  # the invocation's uninitialised reads (initcheck.py)
            body.insert(0, "_gr_uflush();")
        body.insert(0, "_gr_oflush();")  # and its accesses out of bounds (bounds.py)
        body.insert(0, "_gr_sflush();")  # and a filter run's unseen accesses (runtime.wgsl)
        return self._add("_gr_exit", [], None, body)
