"""The OpenCL C rewriter: walks libclang's AST and wraps every access to `__global`/
`__local` memory, every atomic, vload/vstore, async copy and barrier in a call to a
generated helper that logs and then performs it (docs/internals.md §5). The helpers
of plain accesses are accesses.py's, those of calls builtins.py's.

A helper call is an ordinary expression, so evaluation order, short circuits and
loop conditions stay as written and index expressions are evaluated once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import cast

from gpurace.limits import MAX_NESTING, deep_recursion, lost_recursion, too_deep
from gpurace.model import (
    Binding,
    Event,
    GpuraceError,
    Instrumented,
    Kind,
    Site,
    Space,
    TrackedVar,
)

from . import frontend
from .accesses import AccessHelpers
from .builtins import ADDR, RV, BuiltinCalls
from .edits import Edit, apply
from .elide import const_escape
from .predict import Branch, Predictor, waiting_functions
from .runtime import HINT_SHIFT, KERNEL_PARAMS, ORDER_CL, PS, WG_BARRIER, prelude
from .types import (
    c_type,
    element_stride,
    is_array,
    is_pointer,
    is_vector,
    own_space,
    param_type,
    tracked_space,
)

_IDENT = re.compile(r"[A-Za-z_]\w*")

# a helper's parameter and local names, renamed `_gr_*` once generated: helpers are
# defined inside the user's text, after the user's macros
_HELPER_LOCALS = re.compile(r"(?<![.\w>])\b(p|v|s|site|sl|ss|t|r|old|k|a\d+)\b")


class Rewriter(AccessHelpers, BuiltinCalls):
    """One pass over a parsed program: collects the edits, sites, tracked variables
    and helper definitions, then applies the edits to the (macro-expanded) text."""

    def __init__(self, text: str, smap: frontend.SourceMap, tu, path: str):
        self.ci = frontend._cindex()
        self.K = self.ci.CursorKind
        self.text = text
        self.smap = smap
        self.depth = 0  # of visit's recursion
        self.tu = tu
        self.path = path
        # uses of macros left in the text (not the user's, or without accesses)
        self.macro_uses = [
            (c.extent.start.offset, self.end(c))
            for c in tu.cursor.get_children()
            if c.kind == self.K.MACRO_INSTANTIATION and self.in_file(c)
        ]
        self.then_store: tuple[str, int, str] | None = None
        self.then_loads = 0  # loads marked ACC_THEN_STORE so far
        self.edits: list[Edit] = []
        self.sites: list[Site] = []
        self.variables: list[TrackedVar] = []
        self.params: dict[str, list[Binding]] = {}
        self.entry_points: dict[str, tuple[int, int, int]] = {}
        self.notes: list[str] = []
        self.helpers: dict[str, str] = {}
        self.helper_defs: list[tuple[int, str]] = []  # (insert offset, definition)
        self.fn_start = 0
        self.has_barrier = False
        self.uses_wg_barrier = False
        self.uses_copies = False
        self.uses_order = False  # C11 atomics or fences: ORDER events (docs/ordering.md)
        # (offset, end of the return statement or None for the closing brace, site)
        self.kernel_exits: list[tuple[int, int | None, int]] = []
        self.event_sites: dict[int, int] = {}  # where a barrier/exit site starts -> its id
        self.waits: set[str] = set()  # user functions that reach a barrier
        self.max_slots = 1
        self.program_vars: list = []  # program-scope __global variables so far
        # const __global parameters whose loads need no race tracking (elide.py)
        self.elided: list[int] = []
        self.escape: str | None = None  # why none is (a conversion that drops const)
        # a kernel's elided parameter (its declaration's hash) -> its slot in the
        # kernel's _gr_state_t, for its accesses' hint (slot_hint)
        self.slots: dict[int, int] = {}

    # ------------------------------------------------------------------ utilities
    def src(self, c) -> str:
        return self.text[c.extent.start.offset : self.end(c)]

    def end(self, c) -> int:
        """Where cursor `c` ends in the text. libclang ends a vector literal such as
        `(float4)(-1.0f)` before its closing parenthesis; an extent with unbalanced
        parentheses is extended past the ones it lacks. An expression that ends in a
        use of a macro left unexpanded (``x = SCAN(a,\n b)``) ends where that use
        ends (libclang ends it at the macro's name)."""
        start, end = c.extent.start.offset, c.extent.end.offset
        for ms, me in getattr(self, "macro_uses", ()):
            if start <= ms <= end < me:
                end = me
        missing = self.text.count("(", start, end) - self.text.count(")", start, end)
        while missing > 0 and end < len(self.text):
            if self.text[end] == ")":
                missing -= 1
            elif not self.text[end].isspace():
                break
            end += 1
        return end

    def in_file(self, c) -> bool:
        f = c.location.file
        return bool(f) and f.name == self.path

    def note(self, offset: int, what: str) -> None:
        line, col = self.smap.line_col(offset)
        msg = f"{self.path}:{line}:{col}: {what}"
        if msg not in self.notes:
            self.notes.append(msg)

    def site(self, kind: Kind, start: int, end: int, var: str, event: Event | None = None) -> int:
        line, col = self.smap.line_col(start)
        os_, oe = self.smap.span(start, end)
        operand = " ".join(self.smap.original[os_:oe].split())
        sid = len(self.sites)
        self.sites.append(
            Site(sid, self.path, line, col, kind, operand, self.smap.line_text(line), var, event)
        )
        return sid

    def helper(self, key: str, make) -> str:
        """The name of the helper for `key`, defining it (before the current function)
        the first time: `make(name)` returns its definition."""
        name = self.helpers.get(key)
        if name is None:
            name = f"_gr_h{len(self.helpers)}"
            self.helpers[key] = name
            self.helper_defs.append((self.fn_start, _HELPER_LOCALS.sub(r"_gr_\1", make(name))))
        return name

    def children(self, c) -> list:
        return list(c.get_children())

    def strip(self, c):
        """Below implicit casts (same extent, unexposed)."""
        while c.kind == self.K.UNEXPOSED_EXPR and not self.vec_elem(c):
            ch = self.children(c)
            if len(ch) != 1:
                break
            c = ch[0]
        return c

    def vec_elem(self, c) -> str | None:
        """The selector if `c` is a vector component expression (`v.xy`), else None."""
        if c.kind != self.K.UNEXPOSED_EXPR:
            return None
        ch = self.children(c)
        if len(ch) != 1 or not is_vector(ch[0].type):
            return None
        tail = self.text[self.end(ch[0]) : self.end(c)].strip()
        if tail.startswith(".") and tail[1:].strip():
            return tail[1:].strip()
        return None

    def root_name(self, text: str) -> str:
        m = _IDENT.search(text)
        return m.group() if m else ""

    # ------------------------------------------------------------------ program
    def run(self) -> Instrumented:
        K = self.K
        self.escape = const_escape(K, self.tu, self.in_file)
        self.user_functions = {
            c.spelling
            for c in self.tu.cursor.get_children()
            if c.kind == K.FUNCTION_DECL and self.in_file(c)
        }
        self.waits = waiting_functions(
            self,
            [
                c
                for c in self.tu.cursor.get_children()
                if c.kind == K.FUNCTION_DECL and self.in_file(c)
            ],
        )
        for c in self.tu.cursor.get_children():
            if c.kind == K.FUNCTION_DECL and self.in_file(c):
                self.function(c)
            elif c.kind == K.VAR_DECL and self.in_file(c) and tracked_space(c.type) is not None:
                self.program_var(c)
        if len(self.sites) > 1 << HINT_SHIFT:  # _gr_acc takes the bits above for a hint
            raise GpuraceError(
                f"{len(self.sites)} accesses and events: at most {1 << HINT_SHIFT} per program",
                self.path,
            )
        nv = len(self.variables)
        for off, close, sid in self.kernel_exits if self.has_barrier else []:
            if close is None:  # the kernel's closing brace
                self.insert(off, f"_gr_exit(_gr_s, {sid}u); ")
            else:  # a return statement: `{ exit; return ...; }`
                self.insert(off, f"{{ _gr_exit(_gr_s, {sid}u); ")
                self.insert(close, " }")
        for off, text in self.helper_defs:
            line = self.smap.line_col(off)[0]
            self.insert(off, f"{text}\n#line {line}\n")
        body = apply(self.text, self.edits)
        local = any(v.space == Space.LOCAL for v in self.variables)
        events = self.has_barrier or self.uses_order
        head = prelude(nv, self.max_slots, self.uses_copies, events, local)
        head += WG_BARRIER if self.uses_wg_barrier else ""
        head += f"#define _GR_ORDER {int(self.uses_order)}\n"
        head += ORDER_CL if self.uses_order else ""
        kernels = list(self.entry_points)
        if not kernels:
            raise GpuraceError("no __kernel function found", self.path)
        return Instrumented(
            language="opencl",
            source=head + "#line 1\n" + body,
            entry=kernels[0],
            workgroup_size=self.entry_points[kernels[0]],
            sites=self.sites,
            variables=self.variables,
            bindings=list(self.params[kernels[0]]),
            entry_points=self.entry_points,
            not_instrumented=self.notes,
            params=self.params,
            ordering=self.uses_order,
            elided=tuple(self.elided),
        )

    def insert(self, offset: int, text: str) -> None:
        self.edits.append(Edit(offset, offset, lambda sub: text))

    def function(self, fn) -> None:
        K = self.K
        name_off = fn.location.offset
        kernel = self.is_kernel(fn)
        params = [c for c in self.children(fn) if c.kind == K.PARM_DECL]
        body = next((c for c in self.children(fn) if c.kind == K.COMPOUND_STMT), None)
        # the parameter list's closing parenthesis
        if params:
            rp = self.skip_to(self.end(params[-1]), ")")
            lp = None
        else:
            lp = self.skip_to(name_off + len(fn.spelling), "(")
            rp = self.skip_to(lp + 1, ")")
        extra = KERNEL_PARAMS if kernel else f"{PS}_gr_s"
        if lp is not None and self.text[lp + 1 : rp].strip() in ("", "void"):
            self.edits.append(Edit(lp + 1, rp, lambda sub: extra))
        else:
            self.insert(rp, ", " + extra)
        if body is None:
            return
        self.fn_start = fn.extent.start.offset
        if kernel:
            self.kernel(fn, params, body)
        for branch in Predictor(self, self.waits).function(body, kernel):
            self.predict(branch)
        self.visit(body, RV, kernel)

    def predict(self, b: Branch) -> None:
        """Wrap a branch's condition in `_gr_pred` (docs/internals.md §5), once the
        sites are known and only in programs with a barrier (else exits are not logged)."""

        def build(sub, b=b):
            cond = sub(b.start, b.end)
            args = []
            for nxt in (b.taken, b.skipped):
                sid = None if nxt is None else self.event_sites.get(nxt.offset)
                args.append("0u, 0u" if sid is None else f"{sid}u, {nxt.code}")
            if not self.has_barrier or args == ["0u, 0u", "0u, 0u"]:
                return cond
            return f"_gr_pred(({cond}) ? 1 : 0, _gr_s, {args[0]}, {args[1]})"

        self.edits.append(Edit(b.start, b.end, build))

    def is_kernel(self, fn) -> bool:
        # clang gives kernels a calling convention libclang does not name ("unexposed",
        # 200): this also finds kernels declared through a macro
        return self.ci.conf.lib.clang_getFunctionTypeCallingConv(fn.type) == 200 or bool(
            re.search(
                r"\b(__kernel|kernel)\b", self.text[fn.extent.start.offset : fn.location.offset]
            )
        )

    def skip_to(self, pos: int, ch: str) -> int:
        while self.text[pos] != ch:
            pos += 1
        return pos

    def kernel(self, fn, params, body) -> None:
        name = fn.spelling
        head = self.text[fn.extent.start.offset : body.extent.start.offset]
        m = re.search(r"reqd_work_group_size\s*\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)", head)
        self.entry_points[name] = (
            # the pattern has three groups: a 3-tuple
            cast(tuple[int, int, int], tuple(int(x) for x in m.groups())) if m else (0, 0, 0)
        )
        bindings = []
        track: list[str] = []
        for i, p in enumerate(params):
            t = p.type
            if is_pointer(t):
                pointee = t.get_pointee()
                q = own_space(pointee)
                kind = {"__global": "global", "__local": "local", "__constant": "constant"}.get(
                    q, "scalar"
                )
                etype = c_type(pointee)
                stride = max(1, pointee.get_size())
                var = None
                if kind in ("global", "local"):
                    var = len(self.variables)
                    space = Space.GLOBAL if kind == "global" else Space.LOCAL
                    self.variables.append(
                        TrackedVar(
                            var,
                            p.spelling,
                            space,
                            0,
                            i,
                            None,
                            stride,
                            etype,
                            "read" if pointee.is_const_qualified() else "read_write",
                            name,
                        )
                    )
                    lw0 = self.local_first_word(var)
                    if kind == "global" and pointee.is_const_qualified() and not self.escape:
                        self.elided.append(var)
                        lw0 = "_GR_ELIDED_LW0"
                        self.slots[p.hash] = len(track)
                    track.append(
                        f"_gr_track(_gr_s, (ulong){p.spelling}, {int(space)}u, {var}u, "
                        f"_gr_ctl[_GR_CTL_SIZES + {var}u], {lw0});"
                    )
                access = "read" if pointee.is_const_qualified() else "read_write"
                ptype = param_type(pointee)
                bindings.append(Binding(0, i, p.spelling, kind, access, None, stride, ptype, var))
            else:
                bindings.append(
                    Binding(
                        0,
                        i,
                        p.spelling,
                        "scalar",
                        "read",
                        t.get_size(),
                        t.get_size(),
                        param_type(t),
                        None,
                    )
                )
        self.params[name] = bindings
        for d in self.program_vars:  # the program-scope __global variables it can see
            var = len(self.variables)
            stride, etype = element_stride(d.type)
            self.variables.append(
                TrackedVar(
                    var, d.spelling, Space.GLOBAL, None, None, d.type.get_size(), stride, etype,
                    "read_write", name,
                )
            )  # fmt: skip
            track.append(
                f"_gr_track(_gr_s, (ulong)&{d.spelling}, 0u, {var}u, "
                f"(uint)sizeof({d.spelling}), 0u);"
            )
        self.kernel_track = len(track)
        prologue = (
            f" _gr_state_t _gr_st; {PS}_gr_s = &_gr_st;"
            " _gr_init(_gr_s, _gr_log, _gr_ctl, _gr_shd); " + " ".join(track)
        )
        self.insert(body.extent.start.offset + 1, prologue)
        close = self.end(body) - 1
        sid = self.site(Kind.EVENT, close, close + 1, "", Event.EXIT)
        self.kernel_exits.append((close, None, sid))
        self.event_sites[close] = sid
        self.kernel_name = name
        self.max_slots = max(self.max_slots, len(track))

    # ------------------------------------------------------------------ statements
    def visit(self, c, ctx: str, kernel: bool = False) -> None:
        # nesting bounded (limits.MAX_NESTING; clang adds an implicit-cast cursor
        # between most levels) so a long chain such as 1 + 1 + ... is a located error
        self.depth += 1
        try:
            if self.depth > 2 * MAX_NESTING:
                raise too_deep(self.path, *self.smap.line_col(c.extent.start.offset))
            self._visit(c, ctx, kernel)
        finally:
            self.depth -= 1

    def _visit(self, c, ctx: str, kernel: bool) -> None:
        K = self.K
        k = c.kind
        if k == K.CXX_UNARY_EXPR:  # sizeof / vec_step / alignof: unevaluated
            return
        if k == K.RETURN_STMT and kernel:
            sid = self.site(Kind.EVENT, c.extent.start.offset, self.end(c), "", Event.EXIT)
            semi = self.skip_to(self.end(c), ";")
            self.kernel_exits.append((c.extent.start.offset, semi + 1, sid))
            self.event_sites[c.extent.start.offset] = sid
        if k == K.DECL_STMT and kernel:
            for d in self.children(c):
                if d.kind == K.VAR_DECL and tracked_space(d.type) == Space.LOCAL:
                    self.local_var(d, self.end(c))
        if k == K.BINARY_OPERATOR:
            lhs, rhs = self.children(c)
            op = self.op_between(lhs, rhs)
            if op == "=" and self.is_access(lhs):
                self.store(c, lhs, rhs)
                return
            if op == "=":
                self.visit(lhs, ADDR, kernel)
                self.visit(rhs, RV, kernel)
                return
        if k == K.COMPOUND_ASSIGNMENT_OPERATOR:
            lhs, rhs = self.children(c)
            if self.is_access(lhs):
                self.rmw(c, lhs, rhs, self.op_between(lhs, rhs))
                return
            self.visit(lhs, ADDR, kernel)
            self.visit(rhs, RV, kernel)
            return
        if k == K.UNARY_OPERATOR:
            (sub,) = self.children(c)
            s, e = c.extent.start.offset, self.end(c)
            if sub.extent.start.offset == s:
                op, prefix = self.text[self.end(sub) : e].strip(), False
            else:
                op, prefix = self.text[s : sub.extent.start.offset].strip(), True
            if op in ("++", "--"):
                if self.is_access(sub):
                    self.incdec(c, sub, op, prefix)
                    return
                self.visit(sub, ADDR, kernel)
                return
            if op == "&":
                self.visit(sub, ADDR, kernel)
                return
            if op == "*":
                if ctx == RV and self.is_access(c):
                    self.load(c)
                    return
                self.visit(sub, RV, kernel)
                return
        if k == K.CALL_EXPR:
            self.call(c, kernel)
            return
        if self.lvalue_kind(c):
            if ctx == RV and self.is_access(c) and not is_array(c.type):
                self.load(c)
            else:
                self.parts(c, kernel)
            return
        for ch in self.children(c):
            if k == K.UNEXPOSED_EXPR or k == K.PAREN_EXPR:
                self.visit(ch, ctx, kernel)
            else:
                self.visit(ch, RV, kernel)

    def program_var(self, d) -> None:
        """A program-scope `__global` variable (OpenCL C 2.0): tracked in every kernel
        defined after it, as a variable of that kernel with its static size."""
        if d.storage_class != self.ci.StorageClass.EXTERN and d.type.get_size() > 0:
            self.program_vars.append(d)
        else:
            self.note(
                d.extent.start.offset,
                f"program-scope variable '{d.spelling}' is not tracked (declared, not "
                "defined here): accesses to it are counted as unattributed",
            )

    def local_first_word(self, var: int) -> str:
        """The first word of `__local` variable `var` in its group's local order (the
        kernel's __local variables and pointer parameters in id order, a whole number
        of words each, sizes from the control words): an expression for the prologue."""
        v = self.variables[var]
        if v.space != Space.LOCAL:
            return "0u"
        before = [
            u.id for u in self.variables[:var] if u.space == Space.LOCAL and u.kernel == v.kernel
        ]
        return " + ".join(f"_gr_lw(_gr_ctl, {u}u)" for u in before) or "0u"

    def local_var(self, d, after: int) -> None:
        var = len(self.variables)
        size = d.type.get_size()
        stride, etype = element_stride(d.type)
        self.variables.append(
            TrackedVar(
                var,
                d.spelling,
                Space.LOCAL,
                None,
                None,
                size,
                stride,
                etype,
                "read_write",
                self.kernel_name,
            )
        )
        self.insert(
            after,
            f" _gr_track(_gr_s, (ulong)&{d.spelling}, 1u, {var}u, (uint)sizeof({d.spelling}), "
            f"{self.local_first_word(var)});",
        )
        self.kernel_track += 1
        self.max_slots = max(self.max_slots, self.kernel_track)

    def op_between(self, lhs, rhs) -> str:
        t = self.text[self.end(lhs) : rhs.extent.start.offset]
        t = re.sub(r"/\*.*?\*/|//[^\n]*", "", t, flags=re.S)
        return t.strip()

    # ------------------------------------------------------------------ lvalues
    def lvalue_kind(self, c) -> bool:
        K = self.K
        return c.kind in (K.ARRAY_SUBSCRIPT_EXPR, K.MEMBER_REF_EXPR, K.DECL_REF_EXPR) or bool(
            self.vec_elem(c)
        )

    def is_access(self, c) -> bool:
        """An lvalue in tracked memory (possibly in parentheses)."""
        c = self.unparen(c)
        if not (self.lvalue_kind(c) or self.is_deref(c)):
            return False
        if tracked_space(c.type) is None:
            if (
                own_space(c.type) == "__generic"
                or (self.is_deref(c) or c.kind == self.K.ARRAY_SUBSCRIPT_EXPR)
                and self.generic_base(c)
            ):
                self.note(
                    c.extent.start.offset,
                    "access through a generic pointer is not "
                    "tracked (qualify the pointer __global or __local)",
                )
            return False
        if c.kind == self.K.ARRAY_SUBSCRIPT_EXPR and is_vector(self.children(c)[0].type):
            self.note(
                c.extent.start.offset,
                "subscript of a vector in tracked memory is not instrumented (use .sN components)",
            )
            return False
        if self.in_unexpanded_macro(c):
            return False
        return True

    def generic_base(self, c) -> bool:
        ch = self.children(c)
        return (
            bool(ch)
            and is_pointer(ch[0].type)
            and own_space(ch[0].type.get_pointee()) == "__generic"
        )

    def in_unexpanded_macro(self, c) -> bool:
        s, e = c.extent.start.offset, self.end(c)
        for m in self.macro_uses:
            if m[0] <= s and e <= m[1]:
                self.note(
                    s,
                    "access inside a macro defined outside the file (-D or "
                    "header) is not instrumented",
                )
                return True
        return False

    def is_deref(self, c) -> bool:
        if c.kind != self.K.UNARY_OPERATOR:
            return False
        (sub,) = self.children(c)
        return (
            sub.extent.start.offset > c.extent.start.offset
            and self.text[c.extent.start.offset : sub.extent.start.offset].strip() == "*"
        )

    def unparen(self, c):
        while c.kind == self.K.PAREN_EXPR:
            c = self.children(c)[0]
        return c

    def parts(self, c, kernel: bool = False) -> None:
        """Visit what an lvalue evaluates besides the access itself."""
        c = self.unparen(c)
        K = self.K
        if c.kind == K.ARRAY_SUBSCRIPT_EXPR:
            base, idx = self.children(c)
            self.visit(base, RV if not is_array(self.strip(base).type) else ADDR, kernel)
            self.visit(idx, RV, kernel)
        elif c.kind == K.MEMBER_REF_EXPR:
            ch = self.children(c)
            if ch:
                arrow = "->" in self.text[self.end(ch[0]) : self.end(c)]
                self.visit(ch[0], RV if arrow else ADDR, kernel)
        elif self.vec_elem(c):
            self.visit(self.children(c)[0], ADDR, kernel)
        elif self.is_deref(c):
            self.visit(self.children(c)[0], RV, kernel)
        elif c.kind != K.DECL_REF_EXPR:
            self.visit(c, ADDR, kernel)

    def access_info(self, c):
        """(node, space, selector, vector base) of an access node."""
        c = self.unparen(c)
        sel = self.vec_elem(c)
        space = tracked_space(c.type)
        base = self.children(c)[0] if sel else None
        return c, space, sel, base

    def var_of(self, c) -> str:
        return self.root_name(self.src(c))

    def slot_hint(self, sid: int, c) -> int:
        """Site `sid` as the access `c` passes it to its helper: when it names an
        elided parameter `p` (`p[i]`, `*p`, `p[i].f`), with p's slot in the bits from
        HINT_SHIFT, as 1 + slot, so that a load that lies in that slot skips `_gr_acc`
        (`_gr_elided`, shaders/runtime.cl; `_gr_acc` drops the bits). Other accesses
        carry none: their `_gr_elided` test folds away (a test of every __local load
        cost matmul 1.4%). Only a guess: a reassigned parameter leaves the load to
        `_gr_acc`."""
        K = self.K
        c = self.unparen(self.strip(c))
        # down the record fields (`v.f`) and array subscripts (`t[i][j]`) of one
        # variable, then at most one pointer step (`p[i]`, `*p`)
        while c.kind != K.DECL_REF_EXPR:
            ch = self.children(c)
            if not ch:
                return sid
            if c.kind == K.MEMBER_REF_EXPR:
                if "->" in self.text[self.end(ch[0]) : self.end(c)]:
                    return sid
                step = False
            elif c.kind == K.ARRAY_SUBSCRIPT_EXPR:
                step = not is_array(self.strip(ch[0]).type)
            elif self.is_deref(c):
                step = True
            else:
                return sid
            c = self.unparen(self.strip(ch[0]))
            if step:
                break
        if c.kind != K.DECL_REF_EXPR or c.referenced is None:
            return sid
        slot = self.slots.get(c.referenced.hash)
        if slot is None or slot + 1 >= 1 << (32 - HINT_SHIFT) or sid >= 1 << HINT_SHIFT:
            return sid
        return sid | (slot + 1) << HINT_SHIFT


def instrument(source: str, path: str, options: Sequence[str] = ()) -> Instrumented:
    """Rewrite an OpenCL C program (docs/internals.md §5); GpuraceError if it does not
    parse. `Instrumented.source` still holds the user's preprocessor directives: build
    it with the same -D/-I options. Positions are characters of `source` (any
    encoding's text, CRLF or CR line ends); a leading byte-order mark is no character
    of the program and is dropped."""
    source = source.removeprefix("\ufeff")
    with deep_recursion(), lost_recursion() as lost:
        try:
            tu = frontend.parse(source, path, options)
            text, smap = frontend.expand_access_macros(tu, path, source, tracked_space)
            if text != source:
                tu = frontend.parse(text, path, options)
            inst = Rewriter(text, smap, tu, path).run()
        except RecursionError:
            raise too_deep(path) from None
        except Exception:
            if lost:  # a walk saw a truncated tree: that, not this, is the problem
                raise too_deep(path) from None
            raise
    if lost:
        raise too_deep(path)
    return inst
