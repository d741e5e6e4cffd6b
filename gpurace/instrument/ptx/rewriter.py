"""The PTX rewriter: every tracked memory access and barrier of every ``.entry``
appends a record (docs/internals.md §1, CUDA ABI in §7).

Code is only ever inserted, before an instruction (its record) or after a barrier
(the epoch advance), so the original instructions keep their order and meaning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpurace import abi
from gpurace.model import Binding, Event, GpuraceError, Instrumented, Kind, Site, Space, TrackedVar

from . import (
    asynccopy,
    bounds,
    bulkcopy,
    cluster,
    emit,
    features,
    gridsync,
    mbarriers,
    ordering,
    tmem,
    wgmma,
)
from .asynccopy import async_copy
from .atomics import ATOM_OPS, atomic_detail, scope_order
from .barriers import SYNC_ASYNC, SYNC_FENCE, SYNC_MBARRIER, barrier, is_wait_barrier
from .emit import CLOSE, OPEN
from .inline import INLINE_CLOSE, INLINE_OPEN, call_target, inline_calls, not_inlined
from .locate import Locator, statement_at
from .matrix import matrix_access
from .parse import (
    TYPE_BYTES,
    Function,
    Instr,
    Module,
    Stmt,
    access_size,
    immediate_bits,
    parse_instr,
    parse_module,
    prologue_at,
    reg_type,
    reqntid,
)
from .source import CudaSource
from .variables import Var, plan_vars

# sync-event codes (extra word of the sync log's records)
# instructions that touch memory in ways the rewriter does not model (opcode or its
# first two parts; tests/ptx_memory_opcodes.toml lists every memory instruction)
UNMODELLED = {
    "tex", "tld4", "txq", "suld", "sust", "sured", "suq",
    "multimem", "discard", "tensormap", "ld.async", "st.async", "red.async", "cp.reduce",
    "clusterlaunchcontrol", "stbulk", "st.bulk", "wmma.load", "wmma.store",
}  # fmt: skip
# CUDA's own declared functions that touch none of the kernel's memory (an assert
# message and trap, printf of a thread-local argument buffer, the device heap)
EXTERN_NO_MEMORY = {"__assertfail", "vprintf", "malloc", "free"}
# instructions with an address operand that read or write no memory: hints
NO_ACCESS = {"prefetch", "prefetchu", "applypriority"}
_SPACES = ("global", "shared", "local", "param", "const")


@dataclass
class _State:
    sites: list[Site] = field(default_factory=list)
    site_ids: dict[tuple, int] = field(default_factory=dict)
    variables: list[TrackedVar] = field(default_factory=list)
    not_instrumented: list[str] = field(default_factory=list)
    labels: int = 0

    def label(self) -> str:
        self.labels += 1
        return f"$_gr_L{self.labels}"


def instrument_ptx(
    ptx: str, path: str, source: CudaSource | None = None, user_file: str | None = None,
    initcheck: frozenset[int] | None = None,
) -> Instrumented:  # fmt: skip
    """Instrument every ``.entry`` of `ptx`. `source` (the CUDA file it came from, if
    any) names parameters and ``__shared__`` variables and supplies line texts;
    `initcheck`: `bounds.checked_vars`'s."""
    mod = parse_module(ptx, path)
    entries = [f for f in mod.functions if f.is_entry]
    if not entries:
        raise GpuraceError("the PTX has no .entry (kernel)", path)
    if mod.ptx.find("_gr_rec") >= 0:
        raise GpuraceError("this PTX is already instrumented by gpurace (it has _gr_rec)", path)
    inlined = inline_calls(mod)
    if inlined.callees:
        mod = parse_module(inlined.ptx, path)
        entries = [f for f in mod.functions if f.is_entry]
    st = _State()
    plans = [plan_vars(mod, fn, st.variables, source) for fn in entries]
    views = []
    for fn, (vars_, _) in zip(entries, plans, strict=True):
        tmem.add_var(fn, vars_, st.variables)
        views.append(cluster.add_views(fn, vars_, st.variables))
    nv = len(st.variables)
    if nv > 255:
        raise GpuraceError(f"{nv} tracked variables; at most 255 fit a record's var field", path)
    inserts: list[tuple[int, int, str]] = []  # (offset, order, text)
    params: dict[str, list[Binding]] = {}
    entry_points: dict[str, tuple[int, int, int]] = {}
    checked = bounds.checked_vars(st.variables, initcheck)
    order = ordering.needed(mod)  # ORDER events (docs/ordering.md)
    for fn, (vars_, bindings), fviews in zip(entries, plans, views, strict=True):
        loc = Locator(
            mod, user_file if user_file else (source.path if source else None), source, path
        )
        _Entry(mod, fn, vars_, nv, st, loc, inserts, checked, order, fviews).rewrite()
        params[fn.name] = bindings
        entry_points[fn.name] = reqntid(fn)
    st.not_instrumented += not_inlined(mod, entries, path, inlined.callees)
    # the helpers go after the module header (before the first function)
    first = min(fn.header.start for fn in mod.functions)
    head = _decl_start(mod, first)
    runtime = emit.rec_function(nv) + emit.srec_function() + emit.oob_function(nv)
    if checked:
        runtime += emit.init_function(nv)
    inserts.append((head, 0, emit.wrap(runtime)))
    out = _apply(mod.ptx, inserts)
    return Instrumented(
        language="cuda",
        source=out,
        entry=entries[0].name,
        workgroup_size=entry_points[entries[0].name],
        sites=st.sites,
        variables=st.variables,
        entry_points=entry_points,
        not_instrumented=st.not_instrumented,
        params=params,
        ordering=order,
    )


def _decl_start(mod: Module, first_fn: int) -> int:
    """Where module-scope helpers may go: before the first function or variable that
    follows the .version/.target/.address_size header."""
    for s in mod.stmts:
        if (
            s.depth == 0
            and s.kind == "stmt"
            and not s.text.startswith((".version", ".target", ".address_size", ".file"))
        ):
            return min(s.start, first_fn)
    return first_fn


def _apply(ptx: str, inserts: list[tuple[int, int, str]]) -> str:
    out, pos = [], 0
    for off, _, text in sorted(inserts, key=lambda x: (x[0], x[1])):
        out.append(ptx[pos:off])
        out.append(text)
        pos = off
    out.append(ptx[pos:])
    return "".join(out)


def strip_inserted(ptx: str) -> str:
    """The instrumented PTX minus everything gpurace inserted (= the original): the
    records, then the inlined calls they were inserted into."""
    ptx = re.sub(re.escape(OPEN) + r".*?" + re.escape(CLOSE), "", ptx, flags=re.S)
    return re.sub(re.escape(INLINE_OPEN) + r".*?" + re.escape(INLINE_CLOSE), "", ptx, flags=re.S)


# ---------------------------------------------------------------------------
# one entry
# ---------------------------------------------------------------------------


class _Entry:
    # its queues and state (set by features.plan, which says what each is)
    copies: bool
    cp_mbar: bool
    own: bool
    tma: bool
    bulk: bool
    tma_s: bool
    bulk_g: bool
    own_g: bool
    grid: gridsync.GridPlan
    tmem: Var | None
    wgmma: bool
    tc: bool
    views: dict[int, int]
    cluster_regs: bool
    cluster_waits: set[int]
    cluster_split: set[int]

    def __init__(
        self,
        mod: Module,
        fn: Function,
        vars_: list[Var],
        nv: int,
        st: _State,
        loc: Locator,
        inserts: list[tuple[int, int, str]],
        checked: frozenset[int] = frozenset(),
        order: bool = False,
        views: dict[int, int] | None = None,
    ) -> None:
        self.mod, self.fn, self.vars, self.nv, self.st, self.loc = mod, fn, vars_, nv, st, loc
        self.inserts, self.checked = inserts, checked  # checked: initcheck's variables
        self.order = order  # log ORDER events (ordering.py)
        self.has_barrier = any(
            s.kind == "stmt" and is_wait_barrier(parse_instr(s.text))
            for s in fn.body
            if not s.text.startswith(".")
        )
        features.plan(self, mod, fn, vars_, views)  # its queues and their registers

    # -- helpers -------------------------------------------------------------
    def before(self, stmt: Stmt, code: list[str]) -> None:
        self.inserts.append((stmt.start, 2, emit.wrap("\n".join(code))))

    def after(self, stmt: Stmt, code: list[str]) -> None:
        # order 1: a barrier's epoch advance precedes the next statement's record even
        # when that statement starts right where the barrier ends
        self.inserts.append((stmt.end, 1, emit.wrap("\n".join(code))))

    def site(
        self, stmt: Stmt, kind: Kind, ins: Instr, event: Event | None = None, detail: str = ""
    ) -> int:
        """The site id of `stmt`'s access of `kind`; `detail` (ASYNC_COPY: a copy's
        side) keeps it apart from a plain access at the same place."""
        file, line, col, text = self.loc.where(stmt)
        key = (file, line, col, int(kind), event, ins.op if kind == Kind.EVENT else detail)
        if key not in self.st.site_ids:
            sid = len(self.st.sites)
            self.st.site_ids[key] = sid
            operand = statement_at(text, col) if self.loc.current else ""
            # (an atomic's: its operation, but a red.async's says so: cluster.py)
            detail = atomic_detail(ins) if kind == Kind.ATOMIC and not detail else detail
            self.st.sites.append(
                Site(sid, file, line, col, kind, operand or ins.text, text, "", event, detail)
            )
        return self.st.site_ids[key]

    def incomplete(self, stmt: Stmt, what: str) -> None:
        file, line, col, _ = self.loc.where(stmt)
        self.st.not_instrumented.append(f"{file}:{line}:{col}: {what}")

    # -- the pass ------------------------------------------------------------
    def rewrite(self) -> None:
        fn = self.fn
        extra = (
            ", .param .u64 _gr_log, .param .u64 _gr_ctl, .param .u64 _gr_sync, .param .u64 _gr_shd"
        )
        if not fn.params:
            extra = extra[2:]
        if fn.params_end < 0:
            raise GpuraceError(
                f"entry '{fn.name}' has no parameter list", self.loc.path, fn.header.line
            )
        self.inserts.append((fn.params_end, 0, f"{OPEN}{extra}{CLOSE}"))
        self.inserts.append((fn.open.end, 0, emit.wrap(self._decls())))
        self.inserts.append((prologue_at(fn), 0, emit.wrap(self._prologue())))
        for s in fn.body:
            if s.kind != "stmt":
                continue
            if s.text.startswith("."):
                self.loc.see(s.text)
                continue
            if s.start in self.grid.unmatched:
                self.incomplete(s, gridsync.NOT_MODELLED)
            if s.start not in self.grid.workspace:  # the grid barrier's own: not logged
                self._instr(s, parse_instr(s.text))

    def _decls(self) -> str:
        vids = [v.id for v in self.vars]
        regs = [
            ".reg .b32 %_gr_lid, %_gr_grp, %_gr_epl, %_gr_epg, %_gr_nbar, %_gr_nthr, %_gr_val;",
            ".reg .b32 %_gr_wep, %_gr_xt, %_gr_nmd, %_gr_nst;",
            ".reg .b64 %_gr_log, %_gr_ctl, %_gr_sync, %_gr_unat, %_gr_shd;",
            f".reg .b32 %_gr_t<{emit.SCRATCH32}>;",
            f".reg .b64 %_gr_d<{emit.SCRATCH64}>;",
            f".reg .pred %_gr_q<{emit.SCRATCH_PRED}>;",
        ]
        if vids:
            regs.append(".reg .b64 " + ", ".join(f"%_gr_b{v}, %_gr_e{v}" for v in vids) + ";")
        lids = [v.id for v in self.vars if v.space == Space.LOCAL]
        if lids:
            regs.append(".reg .b32 " + ", ".join(f"%_gr_lw{v}" for v in lids) + ";")
        regs += features.decls(self)
        return "\n".join(regs + bounds.table_decls(self.vars))

    def _prologue(self) -> str:
        nv = self.nv
        code = [
            "ld.param.u64 %_gr_log, [_gr_log];",
            "ld.param.u64 %_gr_ctl, [_gr_ctl];",
            "ld.param.u64 %_gr_sync, [_gr_sync];",
            "cvta.to.global.u64 %_gr_log, %_gr_log;",
            "cvta.to.global.u64 %_gr_ctl, %_gr_ctl;",
            "cvta.to.global.u64 %_gr_sync, %_gr_sync;",
            "ld.param.u64 %_gr_shd, [_gr_shd];",
            "cvta.to.global.u64 %_gr_shd, %_gr_shd;",
            f"add.s64 %_gr_unat, %_gr_ctl, {4 * abi.ctl_unattributed(nv)};",
        ]
        for reg, special in (("%_gr_lid", "tid"), ("%_gr_grp", "ctaid")):
            n = "ntid" if special == "tid" else "nctaid"
            code += [
                f"mov.u32 %_gr_t0, %{special}.x;",
                f"mov.u32 %_gr_t1, %{special}.y;",
                f"mov.u32 %_gr_t2, %{special}.z;",
                f"mov.u32 %_gr_t3, %{n}.x;",
                f"mov.u32 %_gr_t4, %{n}.y;",
                f"mad.lo.u32 {reg}, %_gr_t4, %_gr_t2, %_gr_t1;",
                f"mad.lo.u32 {reg}, {reg}, %_gr_t3, %_gr_t0;",
            ]
        code += [
            "mov.u32 %_gr_t0, %ntid.x;",
            "mov.u32 %_gr_t1, %ntid.y;",
            "mov.u32 %_gr_t2, %ntid.z;",
            "mul.lo.u32 %_gr_nthr, %_gr_t0, %_gr_t1;",
            "mul.lo.u32 %_gr_nthr, %_gr_nthr, %_gr_t2;",
            "mov.u32 %_gr_epl, 0;",
            "mov.u32 %_gr_epg, 0;",
            "mov.u32 %_gr_nbar, 0;",
            "mov.u32 %_gr_wep, 0;",
            "mov.u32 %_gr_nmd, 0;",  # named barriers (named.py)
            "mov.u32 %_gr_nst, 0;",
            *features.prologue(self),
        ]
        for slot, v in enumerate(self.vars):
            code += [
                v.base,
                f"ld.global.u32 %_gr_t0, [%_gr_ctl+{4 * abi.ctl_size(nv, v.id)}];",
                "cvt.u64.u32 %_gr_d0, %_gr_t0;",
                f"add.s64 %_gr_e{v.id}, %_gr_b{v.id}, %_gr_d0;",
                *bounds.table_slot(slot, v),
            ]
        # each shared variable's first word in the block's local order (the prefilter's
        # local area, internals §7): the words of the preceding ones, ceil(extent / 4)
        code.append("mov.u32 %_gr_t1, 0;")
        for v in self.vars:
            if v.space == Space.LOCAL:
                code += [
                    f"mov.u32 %_gr_lw{v.id}, %_gr_t1;",
                    f"ld.global.u32 %_gr_t0, [%_gr_ctl+{4 * abi.ctl_size(nv, v.id)}];",
                    "add.u32 %_gr_t0, %_gr_t0, 3;",
                    "shr.u32 %_gr_t0, %_gr_t0, 2;",
                    "add.u32 %_gr_t1, %_gr_t1, %_gr_t0;",
                ]
        return "\n".join(code)

    # -- instructions --------------------------------------------------------
    def _instr(self, s: Stmt, ins: Instr) -> None:
        op = ins.op
        if self.views and (op in ("wgmma", "tcgen05") or (op == "cp" and ins.has("async"))):
            self.incomplete(s, f"'{ins.opcode}' {cluster.ASYNC_IN_CLUSTER}")
        if op in ("ld", "ldu", "st"):
            self._ld_st(s, ins)
        elif op in ("atom", "red") and not ins.has("async"):
            self._atomic(s, ins)
        elif op == "red" and ins.has("async"):
            cluster.async_access(self, s, ins)
        elif op == "cp" and ins.has("async"):
            async_copy(self, s, ins, SYNC_ASYNC)
        elif op in ("bar", "barrier"):
            barrier(self, s, ins)
            if s.start in self.grid.completes:  # after the block barrier's advance
                self.after(s, gridsync.advance())
        elif op == "tcgen05":
            tmem.instr(self, s, ins)
        elif op == "wgmma":
            wgmma.instr(self, s, ins)
        elif op in ("membar", "fence"):
            self._sync(s, ins, SYNC_FENCE)
            fenced = ordering.fence_order(ins) if self.order else None
            if fenced:
                sid, skip = self.site(s, Kind.EVENT, ins), self.st.label()
                code = self._guard(ins, skip) + ordering.fence(sid, *fenced) + [f"{skip}:"]
                self.before(s, code)
        elif op == "mbarrier":
            self._sync(s, ins, SYNC_MBARRIER)
            if self.order:  # after the sync event: an arrival's copy jumps over s
                mbarriers.mbarrier(self, s, ins)
        elif op in ("ret", "exit"):
            if self.has_barrier:
                self._exit(s, ins)
        elif op == "call":
            self._call(s)
        elif op in ("ldmatrix", "stmatrix"):
            matrix_access(self, s, ins)
        elif (
            op in UNMODELLED
            or ".".join(ins.parts[:2]) in UNMODELLED
            or op == "cp"
            or (op not in NO_ACCESS and any(o.startswith("[") for o in ins.operands))
        ):  # any other instruction with an address: not modelled until it is
            self.incomplete(s, f"'{ins.opcode}' accesses memory in a way gpurace does not model")

    def _call(self, s: Stmt) -> None:
        """A call gpurace cannot follow: to a function declared but not defined here
        (``.extern .func``, linked later), or through a pointer."""
        name, _, _ = call_target(s.text)
        if name in EXTERN_NO_MEMORY:
            return
        if name is None:
            self.incomplete(s, f"indirect call '{s.text}': the callee is not instrumented")
        elif name not in {f.name for f in self.mod.functions}:
            self.incomplete(
                s,
                f"call to '{name}', declared but not defined in this PTX (linked later): "
                "its memory accesses and barriers are not instrumented",
            )

    def _space(self, ins: Instr) -> str | None:
        for sp in _SPACES:
            if ins.has(sp):
                return sp
        return None

    def _ld_st(self, s: Stmt, ins: Instr) -> None:
        space = self._space(ins)
        if space in ("local", "param", "const"):
            return
        if ins.has("async"):
            cluster.async_access(self, s, ins)
            return
        if "::cluster" in ins.parts and not self.views:
            self.incomplete(
                s, f"'{ins.opcode}' accesses another block's shared memory (not tracked)"
            )
            return
        if ins.has("bulk"):
            self.incomplete(s, f"'{ins.opcode}' (bulk store of a byte count) is not tracked")
            return
        # the address is the first [...] operand (a cache policy may follow it)
        addr = next((o for o in ins.operands if o.startswith("[")), "")
        size = access_size(ins)
        if size is None or size > 16:
            self.incomplete(s, f"'{ins.opcode}': access size not understood")
            return
        order = next(
            (o for o in ("volatile", "relaxed", "acquire", "release", "mmio") if ins.has(o)), None
        )
        code: list[str] = []
        if order:  # strong accesses of the PTX memory model: atomic loads/stores
            kind, extra = Kind.ATOMIC, (1 if ins.op != "st" else 2) | scope_order(ins) << 8
            value_known = False
        else:
            kind, extra = (Kind.STORE if ins.op == "st" else Kind.LOAD), 0
            value_known = False
            if ins.op == "st":
                value_known = self._value(ins, ins.operands[1], size, code)
        sid = self.site(s, kind, ins)
        out = self._redirect(s, ins.operands[0] if ins.op != "st" else None)
        strong = self.order and kind == Kind.ATOMIC
        code += ordering.save(ins, None) if strong else []
        self._access(s, ins, sid, kind, space, addr, size, value_known, extra, code, out)
        if strong:
            self.after(s, ordering.after(ins, None, sid, extra, self.st.label()))

    def _atomic(self, s: Stmt, ins: Instr) -> None:
        space = self._space(ins)
        if space in ("local", "param", "const"):
            return
        opname = next((p for p in ins.parts[1:] if p in ATOM_OPS), None)
        size = access_size(ins)
        if opname is None or size is None:
            self.incomplete(s, f"'{ins.opcode}': atomic operation not understood")
            return
        if "::cluster" in ins.parts and not self.views:
            self.incomplete(s, f"'{ins.opcode}' accesses another block's shared memory")
            return
        addr = next((o for o in ins.operands if o.startswith("[")), "")
        extra = ATOM_OPS[opname] | scope_order(ins) << 8
        sid = self.site(s, Kind.ATOMIC, ins)
        out = self._redirect(s, ins.operands[0] if ins.op == "atom" else None)
        cas = opname == "cas" and bool(self.checked)  # initcheck: bounds.cas_written
        if cas:
            self.before(s, [bounds.CAS_UNTESTED])
        pre = ordering.save(ins, opname) if self.order else []
        self._access(s, ins, sid, Kind.ATOMIC, space, addr, size, False, extra, pre, out)
        if cas:
            self.after(s, bounds.cas_written(sid, ins.operands, size, self.st.label()))
        if self.order:
            self.after(s, ordering.after(ins, opname, sid, extra, self.st.label()))

    def _access(
        self,
        s: Stmt,
        ins: Instr,
        sid: int,
        kind: Kind,
        space: str | None,
        addr: str,
        size: int,
        value_known: bool,
        extra: int,
        pre: list[str],
        out: tuple[str, list[str]] | None = None,
        size_reg: str = "",
        post: list[str] | None = None,
        copy: bool = False,
        thread: bool = False,
    ) -> None:
        """The record of one access of `s` (address `addr`), before it; one out of
        bounds is recorded, then goes to `out` (`_redirect`'s) or, without it, is made.
        `size_reg` (a b32 register holding size << 8) stands for a size known only at
        run time (cp.async's src-size; `size` is 0 then). `post` follows a record that
        an attributed access logged (cp.async keeps its arguments: asynccopy.py).
        `copy`: a cp.async record; where the entry follows a thread against its own
        copies (`self.own`), it carries its group and every plain load and store the
        thread's completed groups (asynccopy.own_flags). `thread`: a record of a copy
        that is a thread of its own in the clocks (docs/async.md rules 4 and 6), which
        the prefilters count as several actors."""
        skip, shared = self.st.label(), self.st.label()
        if (self.own or self.own_g) and kind == Kind.ATOMIC:  # not compared with its
            self.before(s, asynccopy.atomic_in_flight(self, s, ins))  # thread's copies
        strong = self.order and kind == Kind.ATOMIC  # its ORDER event needs %_gr_ok
        code = ([ordering.RESET] if strong else []) + self._guard(ins, skip) + pre
        if not self._address(addr, space, code):
            self.incomplete(s, f"'{ins.text}': address operand not understood")
            return
        flags = int(kind) | (8 if value_known else 0) | (size << 8)
        own_bits, own = asynccopy.own_flags(self.own, kind, copy, thread, self.own_g)
        flags |= own_bits
        value = "%_gr_val" if value_known else "0"
        spaces = [Space.LOCAL] if space == "shared" else [Space.GLOBAL]
        if space is None:  # generic: classify at run time
            spaces = [Space.GLOBAL, Space.LOCAL]
            code += [
                "isspacep.shared %_gr_q1, %_gr_d0;",
                f"@%_gr_q1 bra {shared};",
                "isspacep.global %_gr_q1, %_gr_d0;",
                f"@!%_gr_q1 bra {skip};",
                "cvta.to.global.u64 %_gr_d0, %_gr_d0;",
            ]
        rare: list[str] = []
        for sp in spaces:
            if sp == Space.LOCAL and space is None:
                code += [f"bra {skip};", f"{shared}:", "cvta.to.shared.u64 %_gr_d0, %_gr_d0;"]
            if sp == Space.LOCAL and self.views:
                code += cluster.owner()
            f = (
                flags
                | (4 if sp == Space.LOCAL else 0)
                | gridsync.flag(self.grid, sp == Space.GLOBAL)
            )
            oob = self.st.label()
            shared_g = own == bulkcopy.OWN_GLOBAL and sp == Space.LOCAL  # its space's field
            own_sp = bulkcopy.OWN_SHARED if shared_g else own
            inline, rare_sp = bounds.lookup(
                self.vars, sp, sid, f, size, value, extra, oob, self.checked, size_reg, own_sp,
                self.views,
            )  # fmt: skip
            code += inline + (post if post and rare_sp else [])
            if strong and not inline[0].startswith("red.global.add.u32 [%_gr_unat]"):
                code += ordering.attributed()
            rare += rare_sp + ([f"bra {out[0] if out else skip};"] if rare_sp else [])
        if rare:
            code += [f"bra {skip};", *rare]
            if out and out[1]:  # the redirect, emitted by the statement's first record
                code += out[1]
                out[1].clear()
        code.append(f"{skip}:")
        self.before(s, code)

    def _redirect(self, s: Stmt, dest: str | None) -> tuple[str, list[str]] | None:
        """Where an access out of bounds goes instead of `s`: a label after it, through
        code that sets `dest` (a load's or an atomic's destination) to 0. None where
        that cannot be done: `s` is then made (docs/memcheck.md)."""
        zero = bounds.zeroes(self.fn, dest) if dest else []
        if zero is None:
            return None
        done, here = self.st.label(), self.st.label()
        self.after(s, [f"{done}:"])
        return here, [f"{here}:", *zero, f"bra {done};"]

    def _guard(self, ins: Instr, skip: str) -> list[str]:
        if not ins.guard:
            return []
        neg = ins.guard[1:] if ins.guard.startswith("!") else "!" + ins.guard
        return [f"@{neg} bra {skip};"]

    def _address(self, addr: str, space: str | None, code: list[str]) -> bool:
        """Code that leaves the access's address (u64, in its space) in %_gr_d0."""
        m = re.fullmatch(r"\[\s*([%\w$.]+)\s*(?:\+\s*(-?\d+))?\s*\]", addr)
        if not m:
            return False
        base, off = m.group(1), int(m.group(2) or 0)
        if base.startswith("%"):
            t = reg_type(self.fn, base) or "b64"
            if TYPE_BYTES.get(t, 8) == 8:
                code.append(f"mov.b64 %_gr_d0, {base};")
            elif TYPE_BYTES.get(t) == 4 and space == "shared":
                code.append(f"cvt.u64.u32 %_gr_d0, {base};")
            else:
                return False
        elif re.fullmatch(r"\d+", base):
            return False
        elif space == "shared" or base in self.mod.shared or self._local_shared(base):
            code += [f"mov.u32 %_gr_t0, {base};", "cvt.u64.u32 %_gr_d0, %_gr_t0;"]
        elif space == "global" or base in self.mod.globals:
            code.append(f"mov.u64 %_gr_d0, {base};")
        else:
            return False
        if off:
            code.append(f"add.s64 %_gr_d0, %_gr_d0, {off};")
        return True

    def _local_shared(self, name: str) -> bool:
        return any(
            s.kind == "stmt"
            and s.text.startswith(".shared")
            and re.search(rf"\s{re.escape(name)}\b", s.text)
            for s in self.fn.body
        )

    def _value(self, ins: Instr, src: str, size: int, code: list[str]) -> bool:
        """Code that leaves the stored value (internals §1) in %_gr_val."""
        elems = [e.strip() for e in src.strip("{}").split(",")] if src.startswith("{") else [src]
        esize = size // max(1, len(elems))
        words: list[tuple[str, int]] = []  # (b32 register or immediate, bytes)
        for k, e in enumerate(elems):
            if e.startswith("%"):
                t = reg_type(self.fn, e)
                width = TYPE_BYTES.get(t or "", 0)
                if t == "pred" or width == 0:
                    return False
                if width == 2:
                    code.append(f"cvt.u32.u16 %_gr_t{5 + k}, {e};")
                    words.append((f"%_gr_t{5 + k}", min(esize, 2)))
                elif width == 4:
                    code.append(f"mov.b32 %_gr_t{5 + k}, {e};")
                    words.append((f"%_gr_t{5 + k}", min(esize, 4)))
                elif width == 8 and esize == 8:
                    code.append(f"mov.b64 {{%_gr_t{5 + 2 * k}, %_gr_t{6 + 2 * k}}}, {e};")
                    words += [(f"%_gr_t{5 + 2 * k}", 4), (f"%_gr_t{6 + 2 * k}", 4)]
                elif width == 8:
                    code.append(f"cvt.u32.u64 %_gr_t{5 + k}, {e};")
                    words.append((f"%_gr_t{5 + k}", min(esize, 4)))
                else:
                    return False
            else:
                bits = immediate_bits(e, esize)
                if bits is None:
                    return False
                for w in range(max(1, esize // 4)):
                    reg = f"%_gr_t{13 + 2 * k + w}"  # t13..t19 (registers: t5..t12)
                    code.append(f"mov.u32 {reg}, {(bits >> (32 * w)) & 0xFFFFFFFF};")
                    words.append((reg, min(esize, 4)))
        if size <= 4:
            code.append("mov.u32 %_gr_val, 0;")
            shift = 0
            for reg, n in words:
                mask = (1 << (8 * n)) - 1
                code += [
                    f"and.b32 %_gr_t21, {reg}, {mask};",
                    f"shl.b32 %_gr_t21, %_gr_t21, {shift};",
                    "or.b32 %_gr_val, %_gr_val, %_gr_t21;",
                ]
                shift += 8 * n
            return True
        code.append(f"mov.u32 %_gr_val, {emit.FNV_OFFSET};")
        for reg, n in words:
            code += emit.fnv_bytes(reg, n)
        return True

    # -- barriers and events (barriers.py) -------------------------------------
    def _sync(self, s: Stmt, ins: Instr, code_: int) -> None:
        sid = self.site(s, Kind.EVENT, ins)
        skip = self.st.label()
        self.before(s, self._guard(ins, skip) + [emit.call_srec(sid, code_), f"{skip}:"])

    def _exit(self, s: Stmt, ins: Instr) -> None:
        sid = self.site(s, Kind.EVENT, ins, Event.EXIT)
        flags = int(Kind.EVENT) | (int(Event.EXIT) << 24)
        skip = self.st.label()
        code = self._guard(ins, skip)
        code += [emit.call_rec(sid, str(flags), "0", "%_gr_nbar", "0", 0), f"{skip}:"]
        self.before(s, code)
