"""Rewrites of the calls in a program: to its own functions (they gain the state),
and to the OpenCL builtins that touch memory or order it: barriers, atomics,
vload/vstore (and their half forms), async work-group copies and the math builtins
that write through a pointer (`sincos`, `modf`, ...; pointer_builtins.py lists them
all, from the specification).

Each builtin call is replaced by a call to a generated helper taking the same
arguments plus the state and site ids: the helper logs, then calls the builtin
itself. A call that hands a pointer to tracked memory to anything else is listed
in not_instrumented.
"""

from __future__ import annotations

import re
from dataclasses import replace

from gpurace.abi import F_READS_SHIFT
from gpurace.model import Event, Kind, Space

from . import frontend, ordering
from .edits import Edit
from .rewriter_api import RewriterAPI
from .runtime import CMPXCHG, PS, atomic_op
from .types import access_size, c_type, is_pointer, own_space, tracked_space

# the kind word of a compare-exchange that failed: an atomic that only read
READ_ONLY_ATOMIC = int(Kind.ATOMIC) | 1 << F_READS_SHIFT

RV, ADDR = "rv", "addr"  # visiting contexts: value used, or only the address/parts
VLOAD = re.compile(r"^(vloada?_half|vload|vstorea?_half|vstore)(\d*)(_rt[enpz]+)?$")
OUT_ARG = frozenset(("fract", "frexp", "lgamma_r", "modf", "remquo", "sincos"))
NO_ACCESS = frozenset(("to_global", "to_local", "to_private", "get_fence", "prefetch", "printf"))
_UNMODELLED = re.compile(
    r"^(read|write)_image|^(read|write|reserve|commit)_pipe|^(work_group|sub_group)_"
    r"(reserve|commit)_|^enqueue_|^capture_event_profiling_info$|^intel_sub_group_block_"
)


FENCES = ("no fence", "CLK_LOCAL_MEM_FENCE", "CLK_GLOBAL_MEM_FENCE", "both fences")


def constant_fence(K, fence) -> bool:
    """Whether a barrier's fence argument is made of constants only (no variable, no
    call): the same for every work-item."""
    for d in fence.walk_preorder():
        if d.kind == K.CALL_EXPR:
            return False
        if d.kind == K.DECL_REF_EXPR and (
            d.referenced is None or d.referenced.kind != K.ENUM_CONSTANT_DECL
        ):
            return False
    return True


def family(name: str) -> str | None:
    """How the rewriter treats a call to builtin `name` (pointer_builtins.py's
    treatments, and "barrier"); None for a builtin that takes no pointer."""
    if name in ("barrier", "work_group_barrier"):
        return "barrier"
    if name == "wait_group_events":
        return "sync"
    if atomic_op(name) is not None:
        return "atomic"
    if VLOAD.match(name):
        return "vstore" if name.startswith("vstore") else "vload"
    if name in ("async_work_group_copy", "async_work_group_strided_copy"):
        return "async"
    if name in OUT_ARG:
        return "out"
    if name in NO_ACCESS:
        return "none"
    if _UNMODELLED.match(name):
        return "listed"
    return None


class BuiltinCalls(RewriterAPI):
    """Mixin of the Rewriter: calls, one method per builtin family."""

    def call(self, c, kernel: bool) -> None:
        ch = self.children(c)
        callee = self.strip(ch[0]) if ch else None
        args = ch[1:]
        for a in args:
            self.visit(a, RV, kernel)
        if callee is None or callee.kind != self.K.DECL_REF_EXPR:
            return
        name = c.spelling
        if name in self.user_functions:
            end = self.end(c) - 1
            self.insert(end, ", _gr_s" if args else "_gr_s")
            return
        ref = callee.referenced
        where = ref.location.file.name if ref is not None and ref.location.file else self.path
        if where != self.path and not where.startswith(frontend.header_dir()):
            if frontend.touches_no_memory(ref):
                return  # values in, values out: nothing to track
            self.note(
                c.extent.start.offset,
                f"'{name}' is defined in {where}: functions outside the checked file are "
                "not instrumented",
            )
            return
        how = family(name)
        if name == "atomic_work_item_fence" and len(args) == 3:
            self.uses_order = True
            sid = self.site(Kind.EVENT, c.extent.start.offset, self.end(c), "")
            self.call_edit(c, callee, "_gr_fence_order", f"_gr_s, {sid}u")
        elif how in ("barrier", "sync"):
            self.barrier(c, callee, args, name)
        elif how == "atomic":
            self.atomic(c, callee, args, name)
        elif how in ("vload", "vstore"):
            self.vloadstore(c, callee, args, name)
        elif how == "async":
            self.async_copy(c, callee, args, name)
        elif how == "out":
            self.out_arg(c, callee, args, name)
        elif how == "listed" and re.match(r"^(read|write)_image|.*_pipe$", name):
            self.note(c.extent.start.offset, f"'{name}': image and pipe accesses are not tracked")
        elif how == "listed" or how is None and self.tracked_pointer_args(args):
            self.note(
                c.extent.start.offset,
                f"'{name}' is given a pointer to __global or __local memory and is not "
                "modelled: what it accesses is not instrumented",
            )

    def tracked_pointer_args(self, args) -> bool:
        return any(self.pointer_arg(a)[1] is not None for a in args)

    def call_edit(self, c, callee, helper: str, tail: str) -> None:
        lp = self.skip_to(self.end(callee), "(")
        end = self.end(c) - 1
        sep = ", " if self.text[lp + 1 : end].strip() else ""

        def build(sub, lp=lp, end=end):
            return f"{helper}({sub(lp + 1, end)}{sep}{tail})"

        self.edits.append(Edit(c.extent.start.offset, self.end(c), build))

    def out_arg(self, c, callee, args, name) -> None:
        """A math builtin that writes its last argument (`sincos(x, &cosval)`): the
        helper lets it write a private copy, logs the store of those bytes, then
        stores them (a 3-vector: 3 elements logged, like any 3-vector store)."""
        k = len(args) - 1
        pt, space = self.pointer_arg(args[k]) if args else (None, None)
        if space is None:
            return
        assert pt is not None  # space is None when there is no pointer argument
        pointee = pt.get_pointee()
        sid = self.site(
            Kind.STORE, c.extent.start.offset, self.end(c), self.root_name(self.src(args[k]))
        )
        params, ret = self.sig(callee, args, {k: pt})
        size = access_size(pointee)
        call = f"{name}({', '.join([f'a{i}' for i in range(k)] + ['&t'])})"

        def make(h):
            return (
                f"{ret} {h}({', '.join(params)}, {PS}s, uint site) {{\n"
                f"  {c_type(pointee)} t;\n  {ret} r = {call};\n"
                f"  if (!_gr_acc(s, (ulong)a{k}, {int(space)}u, {size}u, site, 1u, "
                "(const __private uchar *)&t, 1u, 0u))\n"
                f"    *a{k} = t;\n  return r;\n}}"
            )

        h = self.helper(f"out|{name}|{'|'.join(params)}|{ret}", make)
        self.call_edit(c, callee, h, f"_gr_s, {sid}u")

    def barrier(self, c, callee, args, name) -> None:
        """barrier, work_group_barrier and wait_group_events: a logged event. A fence
        that is not a constant may differ between work-items, which is divergence
        (every work-item must pass a barrier with the same flags): such a barrier
        has one site per fence (none, local, global, both; the site's `detail`), and
        work-items that pass it with different fences log different sites at one
        ordinal."""
        self.has_barrier = True
        start, end = c.extent.start.offset, self.end(c)
        sid = self.site(Kind.EVENT, start, end, "", Event.BARRIER)
        self.event_sites[start] = sid
        if name == "barrier":
            h = "_gr_barrier"
        elif name == "wait_group_events":
            h = "_gr_wait_events"
        else:
            self.uses_wg_barrier = True
            h = "_gr_wg_barrier" if len(args) == 1 else "_gr_wg_barrier_scope"
        if name != "wait_group_events" and args and not constant_fence(self.K, args[0]):
            for _ in FENCES[1:]:
                self.site(Kind.EVENT, start, end, "", Event.BARRIER)
            for bits, fence in enumerate(FENCES):
                self.sites[sid + bits] = replace(self.sites[sid + bits], detail=fence)
            params = ["cl_mem_fence_flags a0"] + (["memory_scope a1"] if len(args) > 1 else [])
            fwd = ", ".join(f"a{i}" for i in range(len(params)))

            def make(name, h=h, params=params, fwd=fwd):
                return (
                    f"void {name}({', '.join(params)}, {PS}s, uint site) {{\n"
                    f"  {h}({fwd}, s, site + _gr_fence_bits(a0));\n}}"
                )

            h = self.helper(f"fence|{h}", make)
        self.call_edit(c, callee, h, f"_gr_s, {sid}u")

    def pointer_type(self, a):
        """A pointer argument's type below implicit pointer conversions (its own
        address space, not the builtin's generic one; arrays as decayed)."""
        c = a
        while c.kind == self.K.UNEXPOSED_EXPR and not self.vec_elem(c):
            ch = self.children(c)
            if len(ch) != 1 or not is_pointer(ch[0].type):
                break
            c = ch[0]
        return c.type

    def pointer_arg(self, a):
        """(type, space) of a pointer argument, below implicit conversions."""
        t = self.pointer_type(a)
        if not is_pointer(t):
            return t, None
        q = own_space(t.get_pointee())
        if q == "__generic":
            self.note(
                a.extent.start.offset,
                "access through a generic pointer is not "
                "tracked (qualify the pointer __global or __local)",
            )
        return t, tracked_space(t.get_pointee())

    def sig(self, callee, args, typed: dict[int, object]) -> tuple[list[str], str]:
        ftype = callee.type
        ptypes = list(ftype.argument_types())
        out = []
        for i, a in enumerate(args):
            t = typed.get(i, ptypes[i] if i < len(ptypes) else a.type)
            if is_pointer(t) and i not in typed:
                t = self.pointer_type(a)
            out.append(f"{c_type(t)} a{i}")
        return out, c_type(ftype.get_result())

    def atomic(self, c, callee, args, name) -> None:
        if not args:
            return
        pt, space = self.pointer_arg(args[0])
        if space is None:
            return
        sid = self.site(
            Kind.ATOMIC,
            c.extent.start.offset,
            self.end(c),
            self.root_name(self.src(args[0]).lstrip("&(")),
        )
        params, ret = self.sig(callee, args, {0: pt})
        op = atomic_op(name)
        if op == CMPXCHG and len(args) > 1 and name.startswith("atomic_compare_exchange"):
            if self.pointer_arg(args[1])[1] is not None:
                self.note(
                    args[1].extent.start.offset,
                    f"'{name}': an `expected` value in __global or __local memory is "
                    "not tracked (keep it in a private variable)",
                )
        size = access_size(pt.get_pointee())
        call = f"{name}({', '.join(f'a{i}' for i in range(len(args)))})"
        self.uses_order |= ordering.orders(name)
        event = ordering.event(name, len(args), c_type(pt.get_pointee()), ret, int(space), size)

        def make(h):
            log = f"_gr_acc(s, (ulong)a0, {int(space)}u, {size}u, site, {{}}, 0, 0u, {op}u);"
            if op != CMPXCHG:
                # out of bounds: left out, giving zero (docs/memcheck.md)
                head = f"{ret} {h}({', '.join(params)}, {PS}s, uint site) {{"
                skip = "return;" if ret == "void" else f"return ({ret})(0);"
                if ret == "void":
                    return f"{head}\n  if ({log.format('2u')[:-1]}) {skip}\n  {call};\n{event}}}"
                return (
                    f"{head}\n  if ({log.format('2u')[:-1]}) {skip}\n  {ret} r = {call};\n"
                    f"{event}  return r;\n}}"
                )
            # a compare-exchange that fails only reads: logged after the call, as an
            # atomic with the reads bit (flags bit 4; docs/internals.md §1, §3)
            failed = "!r" if name.startswith("atomic_compare_exchange") else "r != a1"
            return (
                f"{ret} {h}({', '.join(params)}, {PS}s, uint site) {{\n"
                f"  {ret} r = {call};\n"
                f"  {log.format(f'({failed}) ? {READ_ONLY_ATOMIC}u : 2u')}\n"
                f"{event}  return r;\n}}"
            )

        h = self.helper(f"at|{name}|{'|'.join(params)}|{ret}", make)
        self.call_edit(c, callee, h, f"_gr_s, {sid}u")

    def vloadstore(self, c, callee, args, name) -> None:
        m = VLOAD.match(name)
        assert m is not None  # family() sent only VLOAD names here
        fam, n = m.group(1), int(m.group(2) or 1)
        store = fam.startswith("vstore")
        pi = 2 if store else 1
        if len(args) <= pi:
            return
        pt, space = self.pointer_arg(args[pi])
        if space is None:
            return
        es = pt.get_pointee().get_size()
        half = "half" in fam
        step = 4 if (fam.startswith("vloada") or fam.startswith("vstorea")) and n == 3 else n
        size = n * (2 if half else es)
        sid = self.site(
            Kind.STORE if store else Kind.LOAD,
            c.extent.start.offset,
            self.end(c),
            self.root_name(self.src(args[pi])),
        )
        params, ret = self.sig(callee, args, {pi: pt})
        call = f"{name}({', '.join(f'a{i}' for i in range(len(args)))})"
        addr = f"(ulong)(a{pi} + a{pi - 1} * {step})"
        # out of bounds: left out, a load giving zero (docs/memcheck.md)
        skip = "return;" if ret == "void" else f"return ({ret})(0);"
        if store and half:
            value = (
                f"  ushort t[{max(n, 4) if n == 3 else n}];\n"
                f"  {name}(a0, 0, (__private half *)t);\n"
                f"  if (_gr_acc(s, {addr}, {int(space)}u, {size}u, site, 1u, "
                f"(const __private uchar *)t, 1u, 0u)) {skip}\n"
            )
        elif store:
            value = (
                f"  if (_gr_acc(s, {addr}, {int(space)}u, {size}u, site, 1u, "
                f"(const __private uchar *)&a0, 1u, 0u)) {skip}\n"
            )
        else:
            value = (
                f"  if (_gr_acc(s, {addr}, {int(space)}u, {size}u, site, 0u, 0, 0u, 0u)) {skip}\n"
            )

        def make(h):
            r = "return " if ret != "void" else ""
            return f"{ret} {h}({', '.join(params)}, {PS}s, uint site) {{\n{value}  {r}{call};\n}}"

        h = self.helper(f"vls|{name}|{'|'.join(params)}|{ret}", make)
        self.call_edit(c, callee, h, f"_gr_s, {sid}u")

    def async_copy(self, c, callee, args, name) -> None:
        """An async work-group copy: an event, then the copy is handed to the runtime's
        pending-copy table, which logs its loads and stores by local index 0 in the
        epochs of the call and again after every barrier until the wait that completes
        it (docs/internals.md §5)."""
        if len(args) < 4:
            return
        dt, dsp = self.pointer_arg(args[0])
        st, ssp = self.pointer_arg(args[1])
        if dsp is None and ssp is None:
            return
        s, e = c.extent.start.offset, self.end(c)
        # a work-group function: an event (it orders nothing, extra 0), so that work-items
        # at different copies, or some at a copy and others elsewhere, are divergence
        self.has_barrier = True
        self.uses_copies = True
        se = self.site(Kind.EVENT, s, e, "", Event.BARRIER)
        self.event_sites[s] = se
        sl = self.site(Kind.LOAD, s, e, self.root_name(self.src(args[1])))
        ss = self.site(Kind.STORE, s, e, self.root_name(self.src(args[0])))
        params, ret = self.sig(callee, args, {0: dt, 1: st})
        strided = name.endswith("strided_copy")
        # the strided side is the global one
        dstep = "a3" if strided and dsp == Space.GLOBAL else "1"
        sstep = "a3" if strided and dsp != Space.GLOBAL else "1"
        sides = []
        for ptr, step, sp, t, site in (("a1", sstep, ssp, st, "sl"), ("a0", dstep, dsp, dt, "ss")):
            n = access_size(t.get_pointee())
            space = 2 if sp is None else int(sp)  # 2: an untracked side, not logged
            sides.append(f"(ulong){ptr}, (uint)(sizeof(*{ptr}) * {step}), {n}u, {space}u, {site}")
        call = f"{name}({', '.join(f'a{i}' for i in range(len(args)))})"

        def make(h):
            return (
                f"{ret} {h}({', '.join(params)}, {PS}s, uint site, uint sl, uint ss) {{\n"
                "  _gr_event(s, site, 0u);\n  s->nbar++;\n"
                f"  _gr_copy(s, (uint)a2, {sides[0]},\n           {sides[1]});\n"
                f"  return {call};\n}}"
            )

        h = self.helper(f"async|{name}|{'|'.join(params)}", make)
        self.call_edit(c, callee, h, f"_gr_s, {se}u, {sl}u, {ss}u")
