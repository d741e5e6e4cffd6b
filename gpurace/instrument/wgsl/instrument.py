"""The WGSL rewriter's entry point: source in, :class:`Instrumented` out.

See docs/internals.md §1-§2 for the record format and the ABI of the rewritten
module (log bindings in group ``log_group``, private state, ``_gr_rec``).
"""

from __future__ import annotations

from gpurace import abi, shaders
from gpurace.limits import deep_recursion
from gpurace.model import Binding, Event, GpuraceError, Instrumented, Space, TrackedVar

from . import ast as A
from . import banked
from .expressions import TRACKED_SPACES, ExpressionRewriter
from .initcheck import UninitReads
from .invariant import variant_reason
from .lexer import _Scanner
from .module import ModuleRewriter, SiteTable
from .parser import Parser, parse_bounded
from .rewriter import FunctionRewriter
from .runtime import TrackedInfo, bank_fits, elided, local_order, log_bindings, prelude
from .semantics import ModuleScope, Sym
from .types import (
    Array,
    Pointer,
    Struct,
    Type,
    concrete,
    has_runtime_array,
    size_of,
    stride_of,
    wgsl,
)

MAX_GROUPS = 4
MAX_TRACKED = 256
_BUILTINS = ("local_invocation_index", "workgroup_id", "num_workgroups")
_BUILTIN_TYPES = {
    "local_invocation_index": "u32",
    "workgroup_id": "vec3<u32>",
    "num_workgroups": "vec3<u32>",
}


def _attr(attrs: list[A.Attribute], name: str) -> A.Attribute | None:
    return next((a for a in attrs if a.name == name), None)


def _word(e: A.Expr) -> str:
    return e.name if isinstance(e, A.Ident) else ""


class _Module:
    """Module-scope analysis: symbols, tracked variables, bindings, entry points."""

    def __init__(
        self,
        source: str,
        path: str,
        overrides: dict[str, float] | None,
        initcheck: frozenset[tuple[int, int]] | None = None,
    ):
        self.source = source
        self.path = path
        self.initcheck = initcheck  # docs/memcheck.md: None, or the uninit bindings
        parser = Parser(source, path)
        self.scanner: _Scanner = parser.scanner
        self._check_names(parser)
        self.mod = parse_bounded(parser)
        self.scope = ModuleScope(path, overrides=dict(overrides or {}))
        self.functions: dict[str, A.Function] = {}
        self.tracked: list[TrackedInfo] = []
        self.bindings: list[Binding] = []
        self.max_group = -1
        self.local_words = 0  # L: the words of the module's local order
        self.banked: list[TrackedInfo] = []  # variables with banked states (banked.py)
        self.invariant: frozenset[str] = frozenset()  # group-invariant entries (invariant.py)
        self.struct_builtins: dict[str, dict[str, str]] = {}  # struct -> builtin -> member
        self._declare()

    def error(self, msg: str, node: A.Node) -> GpuraceError:
        return GpuraceError(msg, self.path, node.line, node.col)

    def _check_names(self, parser: Parser) -> None:
        for t in parser.toks:
            if t.kind == "ident" and t.value.startswith("_gr_"):
                raise GpuraceError(
                    f"identifier '{t.value}' uses the prefix '_gr_' reserved for gpurace",
                    self.path,
                    t.line,
                    t.col,
                )

    def _declare(self) -> None:
        """Resolve module-scope declarations (order-independent, so retry until stable)."""
        syms = self.scope.syms
        for d in self.mod.decls:
            name = _decl_name(d)
            if name is None:
                continue
            if name in syms:
                raise self.error(f"'{name}' is declared twice", d)
            syms[name] = Sym("pending", None, node=d)
            if isinstance(d, A.Function):
                syms[name] = Sym("fn", None, node=d)
                self.functions[name] = d
        todo = [d for d in self.mod.decls if not isinstance(d, A.Function | A.ConstAssert)]
        while todo:
            failed: list[A.Node] = []
            last: GpuraceError | None = None
            for d in todo:
                try:
                    self._resolve(d)
                except GpuraceError as e:
                    failed.append(d)
                    last = e
            if len(failed) == len(todo):
                assert last is not None
                raise last
            todo = failed
        for d in self.mod.decls:
            if isinstance(d, A.GlobalVar) and d.decl.kind == "var":
                self._variable(d)
            if isinstance(d, A.Struct):
                for m in d.members:
                    b = _attr(m.attrs, "builtin")
                    if b and b.args:
                        self.struct_builtins.setdefault(d.name, {})[_word(b.args[0])] = m.name
            for a in getattr(d, "attrs", []):
                if a.name == "group" and a.args:
                    g = self.scope.const_value(a.args[0])
                    if isinstance(g, int):
                        self.max_group = max(self.max_group, g)
        # each workgroup variable's words in the group's local order (the prefilter's)
        local = [info for info in self.tracked if info.space == Space.LOCAL]
        firsts, self.local_words = local_order([size_of(info.type) for info in local])
        for info, first in zip(local, firsts, strict=True):
            info.lw0, info.lwn = first, -(-size_of(info.type) // 4)
        # the variables whose states are banked (banked.py), in a bank order of their own
        names = {info.name for info in local}
        again = banked.repeated(self.functions, names)
        self.invariant = frozenset(
            f.name
            for f in self.functions.values()
            if _attr(f.attrs, "compute") is not None
            and variant_reason(self.scope.syms, self.functions, self.struct_builtins, f) is None
        )
        if self.invariant:
            again = names  # group 0 alone keeps states: see banked.py
        chosen = [info for info in local if info.name in again]
        bfirsts, bank_words = local_order([size_of(info.type) for info in chosen])
        if not bank_fits(self.local_words, bank_words):
            chosen = []
        for info, first in zip(chosen, bfirsts, strict=False):
            info.lb = first + 1
        self.banked = chosen

    def _resolve(self, d: A.Node) -> None:
        syms = self.scope.syms
        if isinstance(d, A.Alias):
            syms[d.name] = Sym("type", self.scope.resolve_type(d.type), node=d)
        elif isinstance(d, A.Struct):
            syms[d.name] = Sym("type", self.scope.struct_type(d), node=d)
        elif isinstance(d, A.GlobalVar):
            v = d.decl
            if v.kind == "var":
                t = self.scope.resolve_type(v.type) if v.type is not None else None
                if t is None and v.init is not None:
                    t = concrete(_typer(self).expr(v.init).type)
                if t is None:
                    raise self.error(f"module-scope var '{v.name}' needs a type", d)
                space = _word(v.targs[0]) if v.targs else "handle"
                access = (
                    _word(v.targs[1])
                    if v.targs and len(v.targs) > 1
                    else ("read" if space in ("storage", "uniform") else "read_write")
                )
                syms[v.name] = Sym("gvar", t, space, access, node=d)
                return
            t = self.scope.resolve_type(v.type) if v.type is not None else None
            value = self.scope.const_value(v.init) if v.init is not None else None
            if v.kind == "override" and v.name in self.scope.overrides:
                value = self.scope.overrides[v.name]
            if t is None and v.init is not None:
                t = _typer(self).expr(v.init).type
            if v.kind == "const" and v.init is not None and t is None:
                raise self.error(f"cannot determine the type of '{v.name}'", d)
            syms[v.name] = Sym(v.kind, t, node=d, value=value)

    def _variable(self, d: A.GlobalVar) -> None:
        v = d.decl
        sym = self.scope.syms[v.name]
        t = sym.type
        assert t is not None
        group = binding = None
        ga, ba = _attr(d.attrs, "group"), _attr(d.attrs, "binding")
        if ga and ga.args and ba and ba.args:
            group = self.scope.const_value(ga.args[0])
            binding = self.scope.const_value(ba.args[0])
        if sym.space in ("storage", "workgroup"):
            space = Space.GLOBAL if sym.space == "storage" else Space.LOCAL
            info = TrackedInfo(len(self.tracked), v.name, space, t, sym.access)
            if self.initcheck is not None and (
                space == Space.LOCAL or (group, binding) in self.initcheck
            ):  # checked for uninitialised reads (docs/memcheck.md)
                info.written = abi.written_stride(size_of(t)) if space == Space.LOCAL else -1
            if info.id >= MAX_TRACKED:
                raise self.error(f"more than {MAX_TRACKED} storage/workgroup variables", d)
            sym.tracked = info
            self.tracked.append(info)
        if sym.space in ("storage", "uniform"):
            if not isinstance(group, int) or not isinstance(binding, int):
                raise self.error(f"'{v.name}' needs @group and @binding attributes", d)
            stride, elem = _elem_layout(t)
            self.bindings.append(
                Binding(
                    group,
                    binding,
                    v.name,
                    sym.space,
                    sym.access,
                    None if has_runtime_array(t) else size_of(t),
                    stride,
                    wgsl(elem),
                    sym.tracked.id if sym.tracked is not None else None,
                )
            )

    def tracked_vars(self) -> list[TrackedVar]:
        out = []
        for info in self.tracked:
            group = binding = None
            if info.space == Space.GLOBAL:
                b = next(b for b in self.bindings if b.name == info.name)
                group, binding = b.group, b.binding
            stride, elem = _elem_layout(info.type)
            size = None if has_runtime_array(info.type) else size_of(info.type)
            access = info.access if info.space == Space.GLOBAL else "read_write"
            out.append(
                TrackedVar(
                    info.id, info.name, info.space, group, binding, size, stride, wgsl(elem), access
                )
            )
        return out

    def workgroup_size(self, fn: A.Function) -> tuple[int, int, int]:
        a = _attr(fn.attrs, "workgroup_size")
        if a is None or not a.args:
            raise self.error(f"entry point '{fn.name}' needs @workgroup_size", fn)
        dims = []
        for e in a.args:
            v = self.scope.const_value(e)
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise self.error(
                    "workgroup size must be a positive constant (an override without a "
                    "default needs a value: the launch file's [overrides] table)",
                    e,
                )
            dims.append(v)
        while len(dims) < 3:
            dims.append(1)
        return dims[0], dims[1], dims[2]


def _decl_name(d: A.Node) -> str | None:
    if isinstance(d, A.Alias | A.Struct | A.Function):
        return d.name
    if isinstance(d, A.GlobalVar):
        return d.decl.name
    return None


def _elem_layout(t: Type) -> tuple[int, Type]:
    """(stride, element type) of the outermost (or trailing runtime) array, else (size, t)."""
    if isinstance(t, Array):
        return stride_of(t), t.elem
    if isinstance(t, Struct) and has_runtime_array(t):
        last = t.members[-1].type
        assert isinstance(last, Array)
        return stride_of(last), last.elem
    return size_of(t), t


def _typer(m: _Module) -> ExpressionRewriter:
    """An expression rewriter over an empty function, to type module-scope initializers."""
    fn = A.Function(0, 0, 0, 0, [], "_", [], [], None, A.Block(0, 0, 0, 0, []))
    sites = SiteTable(m.source, m.path, m.scanner.pos)
    return ExpressionRewriter(ModuleRewriter(m.scope, m.source, m.path, sites, {}), fn, {})


def _entry_builtins(m: _Module, fn: A.Function) -> tuple[dict[str, str], list[str]]:
    """Expressions for the builtins the prologue needs, and parameters to add for the rest."""
    found: dict[str, str] = {}
    for p in fn.params:
        b = _attr(p.attrs, "builtin")
        if b and b.args:
            found[_word(b.args[0])] = p.name
        members = m.struct_builtins.get(_word(p.type), {})
        for bname, member in members.items():
            found[bname] = f"{p.name}.{member}"
    extra = []
    for bname in _BUILTINS:
        if bname not in found:
            pname = f"_gr_{bname}"
            extra.append(f"@builtin({bname}) {pname}: {_BUILTIN_TYPES[bname]}")
            found[bname] = pname
    return found, extra


@deep_recursion()  # the parser bounds the nesting; the rewriter recurses as deep
def instrument(
    source: str,
    path: str,
    entry: str | None = None,
    overrides: dict[str, float] | None = None,
    initcheck: frozenset[tuple[int, int]] | None = None,
) -> Instrumented:
    """Rewrite a WGSL compute module so that it logs its accesses (docs/internals.md §2).

    ``entry`` picks the entry point described by the result (default: the first
    ``@compute`` function); every compute entry point is instrumented. ``overrides``
    gives values for pipeline-overridable constants used in sizes. ``initcheck`` (None:
    off) checks reads of workgroup variables and of the storage bindings it names
    (the launch's ``fill = "uninit"`` buffers) for bytes no write set
    (docs/memcheck.md); a module with neither gets no added code.
    """
    m = _Module(source, path, overrides, initcheck)
    entries = [f for f in m.functions.values() if _attr(f.attrs, "compute") is not None]
    if not entries:
        raise GpuraceError("no @compute entry point in the module", path, 1, 1)
    chosen = entries[0]
    if entry is not None:
        named = [f for f in entries if f.name == entry]
        if not named:
            raise GpuraceError(f"no @compute entry point named '{entry}'", path, 1, 1)
        chosen = named[0]
    log_group = m.max_group + 1
    if log_group >= MAX_GROUPS:
        raise GpuraceError(
            f"the module uses bind group {m.max_group}; the log needs a free group below "
            f"{MAX_GROUPS}",
            path,
            1,
            1,
        )
    wg = m.workgroup_size(chosen)

    sites = SiteTable(source, path, m.scanner.pos)
    mr = ModuleRewriter(m.scope, source, path, sites, m.functions)
    checked = [info.id for info in m.tracked if info.written]
    if checked:  # uninitialised reads (docs/memcheck.md; initcheck.py)
        mr.runtime.uninit = UninitReads([info for info in m.tracked if info.written > 0])
    out_fns: list[str] = []
    for fn in m.functions.values():
        if any(_tracked_ptr_param(m, p) for p in fn.params):
            continue  # emitted per call shape, see ModuleRewriter.specialize
        is_entry = fn in entries
        fr = FunctionRewriter(mr, fn, {}, is_entry)
        if is_entry:
            fr.workgroup = m.workgroup_size(fn)
            found, extra = _entry_builtins(m, fn)
            head = mr.signature(fn, fn.name, {}, extra)
            prologue = [
                f"_gr_init({found['local_invocation_index']}, {found['workgroup_id']}, "
                f"{found['num_workgroups']});",
                "_gr_start();",
            ]
            out_fns.append(fr.function(head, prologue))
        else:
            out_fns.append(fr.function(mr.signature(fn, fn.name, {}), []))
        while mr.pending:
            sfn, sname, aliases = mr.pending.pop(0)
            sr = FunctionRewriter(mr, sfn, aliases, False)
            out_fns.append(sr.function(mr.signature(sfn, sname, aliases), []))

    parts = [d.text + ";" for d in m.mod.directives]
    for d in m.mod.decls:
        if isinstance(d, A.Function):
            continue
        text = source[d.start : d.end]
        parts.append(text + (";" if isinstance(d, A.ConstAssert) else ""))
    # Exit records only matter next to barriers ("finished while others wait"): a
    # module without barriers logs none, one record per work-item fewer.
    log_exits = any(site.event == Event.BARRIER for site in sites.sites)
    parts.append(log_bindings(log_group) + "\n" + prelude(len(m.tracked), log_exits, m.banked))
    if mr.runtime.uninit is not None:
        parts.append(shaders.text("initcheck.wgsl"))
        parts += mr.runtime.uninit.decls(checked)
    parts += mr.runtime.oob.decls()
    parts += mr.runtime.decls
    parts += mr.loops.decls()
    parts += out_fns
    return Instrumented(
        language="wgsl",
        source="\n\n".join(parts) + "\n",
        entry=chosen.name,
        workgroup_size=wg,
        sites=sites.sites,
        variables=m.tracked_vars(),
        bindings=sorted(m.bindings, key=lambda b: (b.group, b.binding)),
        log_group=log_group,
        entry_points={f.name: wg if f is chosen else m.workgroup_size(f) for f in entries},
        not_instrumented=mr.not_instrumented,
        loops=mr.loops.sites,
        initchecked=tuple(checked),
        elided=tuple(info.id for info in m.tracked if elided(info)),
        local_invariant=m.invariant,
    )


def _tracked_ptr_param(m: _Module, p: A.Param) -> bool:
    t = m.scope.resolve_type(p.type)
    return isinstance(t, Pointer) and t.space in TRACKED_SPACES
