"""The OpenCL C rewriter: walks libclang's AST and wraps every access to `__global`/
`__local` memory, every atomic, vload/vstore, async copy and barrier in a call to a
generated helper that logs and then performs it (docs/internals.md §5).

A helper call is an ordinary expression, so evaluation order, short circuits and
loop conditions stay as written and index expressions are evaluated once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

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
from .builtins import VLOAD, BuiltinCalls
from .edits import Edit, apply
from .predict import Branch, Predictor, waiting_functions
from .runtime import KERNEL_PARAMS, PS, WG_BARRIER, atomic_op, prelude
from .types import (
    access_size,
    c_type,
    element_stride,
    is_array,
    is_pointer,
    is_record,
    is_vector,
    leaves,
    own_space,
    tracked_space,
)

_IDENT = re.compile(r"[A-Za-z_]\w*")

_COMPONENTS = {"x": 0, "y": 1, "z": 2, "w": 3, "r": 0, "g": 1, "b": 2, "a": 3}
# a helper's parameter and local names, renamed `_gr_*` once generated: helpers are
# defined inside the user's text, after the user's macros
_HELPER_LOCALS = re.compile(r"(?<![.\w>])\b(p|v|s|site|sl|ss|t|r|old|k|a\d+)\b")
RV, ADDR = "rv", "addr"  # contexts: value used, or only the address/parts


def swizzle(name: str, n: int) -> list[int]:
    """Vector indices a component selector reads or writes, in selector order."""
    m = 4 if n == 3 else n
    if name in ("lo", "hi", "even", "odd"):
        sel = {
            "lo": range(m // 2),
            "hi": range(m // 2, m),
            "even": range(0, m, 2),
            "odd": range(1, m, 2),
        }[name]
        return [i for i in sel if i < n]
    if name[0] in "sS":
        return [int(c, 16) for c in name[1:]]
    return [_COMPONENTS[c] for c in name]


def runs(indices: list[int]) -> list[tuple[int, int]]:
    """Contiguous runs (first index, count) of a set of vector indices."""
    out: list[tuple[int, int]] = []
    for i in sorted(set(indices)):
        if out and out[-1][0] + out[-1][1] == i:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((i, 1))
    return out


class Rewriter(BuiltinCalls):
    """One pass over a parsed program: collects the edits, sites, tracked variables
    and helper definitions, then applies the edits to the (macro-expanded) text."""

    def __init__(self, text: str, smap: frontend.SourceMap, tu, path: str):
        self.ci = frontend._cindex()
        self.K = self.ci.CursorKind
        self.text = text
        self.smap = smap
        self.tu = tu
        self.path = path
        # uses of macros left in the text (not the user's, or without accesses)
        self.macro_uses = [
            (c.extent.start.offset, self.end(c))
            for c in tu.cursor.get_children()
            if c.kind == self.K.MACRO_INSTANTIATION and self.in_file(c)
        ]
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
        # (offset, end of the return statement or None for the closing brace, site)
        self.kernel_exits: list[tuple[int, int | None, int]] = []
        self.event_sites: dict[int, int] = {}  # where a barrier/exit site starts -> its id
        self.waits: set[str] = set()  # user functions that reach a barrier
        self.max_slots = 1

    # ------------------------------------------------------------------ utilities
    def src(self, c) -> str:
        return self.text[c.extent.start.offset : self.end(c)]

    def end(self, c) -> int:
        """Where cursor `c` ends in the text. libclang ends a vector literal such as
        `(float4)(-1.0f)` before its closing parenthesis; an extent with unbalanced
        parentheses is extended past the ones it lacks."""
        start, end = c.extent.start.offset, c.extent.end.offset
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
                self.note(
                    c.extent.start.offset,
                    f"program-scope variable '{c.spelling}' "
                    "is not tracked: accesses to it are counted as unattributed",
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
        head = prelude(nv, self.max_slots) + (WG_BARRIER if self.uses_wg_barrier else "")
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
        )

    def insert(self, offset: int, text: str) -> None:
        self.edits.append(Edit(offset, offset, lambda sub, t=text: t))

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
            self.edits.append(Edit(lp + 1, rp, lambda sub, t=extra: t))
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
        self.entry_points[name] = tuple(int(x) for x in m.groups()) if m else (0, 0, 0)
        bindings = []
        track = []
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
                    track.append(
                        f"_gr_track(_gr_s, (ulong){p.spelling}, {int(space)}u, {var}u, "
                        f"_gr_ctl[_GR_CTL_SIZES + {var}u], {self.local_first_word(var)});"
                    )
                access = "read" if pointee.is_const_qualified() else "read_write"
                bindings.append(Binding(0, i, p.spelling, kind, access, None, stride, etype, var))
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
                        c_type(t),
                        None,
                    )
                )
        self.params[name] = bindings
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

    def leaf_lines(self, t, kind: int, site: str, sp: int, value: str | None) -> list[str]:
        out = []
        ls = leaves(t) if is_record(t) else [(0, access_size(t))]
        for off, size in ls:
            bytes_ = f"(const __private uchar *)&{value} + {off}" if value else "0"
            known = "1u" if value else "0u"
            out.append(
                f"  _gr_acc(s, (ulong)p + {off}u, {sp}u, {size}u, {site}, {kind}u, {bytes_}, "
                f"{known}, 0u);"
            )
        return out

    def run_lines(self, vt, indices, kind, site, sp, value: str | None) -> list[str]:
        es = vt.get_canonical().element_type.get_size()
        out = []
        for first, n in runs(indices):
            off, size = first * es, n * es
            bytes_ = f"(const __private uchar *)&{value} + {off}" if value else "0"
            known = "1u" if value else "0u"
            out.append(
                f"  _gr_acc(s, (ulong)p + {off}u, {sp}u, {size}u, {site}, {kind}u, {bytes_}, "
                f"{known}, 0u);"
            )
        return out

    def pquals(self, t) -> str:
        q = own_space(t)
        return ("volatile " if t.is_volatile_qualified() else "") + q

    def load(self, c) -> None:
        c, space, sel, base = self.access_info(c)
        sid = self.site(Kind.LOAD, c.extent.start.offset, self.end(c), self.var_of(c))
        sp = int(space)
        if sel:
            vt = base.type
            VT, ST = c_type(vt), c_type(c.type)
            idx = swizzle(sel, vt.get_canonical().element_count)

            def make(name, VT=VT, ST=ST, idx=idx, sel=sel):
                body = self.run_lines(vt, idx, 0, "site", sp, None)
                return (
                    f"{ST} {name}(const {self.pquals(vt)} {VT} *p, {PS}s, uint site) {{\n"
                    + "\n".join(body)
                    + f"\n  return (*p).{sel};\n}}"
                )

            h = self.helper(f"ldv|{VT}|{sel}|{self.pquals(vt)}", make)
            b = base

            def build(sub, h=h, b=b, sid=sid):
                return f"{h}(&({sub(b.extent.start.offset, self.end(b))}), _gr_s, {sid}u)"

            self.parts(c)
            self.edits.append(Edit(c.extent.start.offset, self.end(c), build))
            return
        T = c_type(c.type)

        def make(name, T=T, t=c.type):
            body = self.leaf_lines(t, 0, "site", sp, None)
            return (
                f"{T} {name}(const {self.pquals(t)} {T} *p, {PS}s, uint site) {{\n"
                + "\n".join(body)
                + "\n  return *p;\n}"
            )

        h = self.helper(f"ld|{T}|{self.pquals(c.type)}", make)

        def build(sub, h=h, c=c, sid=sid):
            return f"{h}(&({sub(c.extent.start.offset, self.end(c))}), _gr_s, {sid}u)"

        self.parts(c)
        self.edits.append(Edit(c.extent.start.offset, self.end(c), build))

    def cast(self, t, text: str) -> str:
        if is_record(t):
            return text
        return f"({c_type(t)})({text})"

    def store(self, node, lhs, rhs) -> None:
        c, space, sel, base = self.access_info(lhs)
        sid = self.site(Kind.STORE, c.extent.start.offset, self.end(c), self.var_of(c))
        sp = int(space)
        target = base if sel else c
        if sel:
            vt = base.type
            VT, ST = c_type(vt), c_type(c.type)
            idx = swizzle(sel, vt.get_canonical().element_count)

            def make(name, VT=VT, ST=ST, idx=idx, sel=sel, vt=vt):
                body = self.run_lines(vt, idx, 1, "site", sp, "t")
                return (
                    f"{ST} {name}({self.pquals(vt)} {VT} *p, {ST} v, {PS}s, uint site) {{\n"
                    f"  {VT} t = ({VT})(0);\n  t.{sel} = v;\n"
                    + "\n".join(body)
                    + f"\n  (*p).{sel} = v;\n  return v;\n}}"
                )

            h = self.helper(f"stv|{VT}|{sel}|{self.pquals(vt)}", make)
        else:
            T = c_type(c.type)

            def make(name, T=T, t=c.type):
                body = self.leaf_lines(t, 1, "site", sp, "v")
                return (
                    f"{T} {name}({self.pquals(t)} {T} *p, {T} v, {PS}s, uint site) {{\n"
                    + "\n".join(body)
                    + "\n  *p = v;\n  return v;\n}"
                )

            h = self.helper(f"st|{T}|{self.pquals(c.type)}", make)
        ctype = c.type

        def build(sub, h=h, target=target, rhs=rhs, sid=sid):
            ptr = sub(target.extent.start.offset, self.end(target))
            val = self.cast(ctype, sub(rhs.extent.start.offset, self.end(rhs)))
            return f"{h}(&({ptr}), {val}, _gr_s, {sid}u)"

        self.parts(c)
        self.visit(rhs, RV)
        self.edits.append(Edit(node.extent.start.offset, self.end(node), build))

    def rmw_helper(self, c, sel, base, sp, op: str, vtype, key: str) -> str:
        """Helper for `x op= v` (vtype given) or `++`/`--` (op "pre++" etc.)."""
        if sel:
            vt = base.type
            VT, ST = c_type(vt), c_type(c.type)
            idx = swizzle(sel, vt.get_canonical().element_count)
            ld = self.run_lines(vt, idx, 0, "sl", sp, None)
            stl = self.run_lines(vt, idx, 1, "ss", sp, "t")
            read, write = f"(*p).{sel}", f"(*p).{sel} = r;"
            ptype, T = f"{self.pquals(vt)} {VT} *", ST
            fill = f"  {VT} t = ({VT})(0);\n  t.{sel} = r;\n"
        else:
            T = c_type(c.type)
            ld = self.leaf_lines(c.type, 0, "sl", sp, None)
            stl = self.leaf_lines(c.type, 1, "ss", sp, "r")
            read, write = "*p", "*p = r;"
            ptype = f"{self.pquals(c.type)} {T} *"
            fill = ""
        if vtype is not None:
            arg = f", {c_type(vtype)} v"
            apply_ = f"  r {op} v;\n"
            ret = "r"
        else:
            arg = ""
            apply_ = f"  r{op[-2:]};\n"
            ret = "r" if op.startswith("pre") else "old"

        def make(name):
            return (
                f"{T} {name}({ptype}p{arg}, {PS}s, uint sl, uint ss) {{\n"
                + "\n".join(ld)
                + f"\n  {T} old = {read};\n  {T} r = old;\n"
                + apply_
                + fill
                + "\n".join(stl)
                + f"\n  {write}\n  return {ret};\n}}"
            )

        return self.helper(f"rmw|{key}|{ptype}|{sel}|{op}|{arg}", make)

    def rmw(self, node, lhs, rhs, op: str) -> None:
        c, space, sel, base = self.access_info(lhs)
        s, e = c.extent.start.offset, self.end(c)
        sl = self.site(Kind.LOAD, s, e, self.var_of(c))
        ss = self.site(Kind.STORE, s, e, self.var_of(c))
        h = self.rmw_helper(c, sel, base, int(space), op, rhs.type, "cmp")
        target = base if sel else c

        def build(sub, h=h, target=target, rhs=rhs):
            ptr = sub(target.extent.start.offset, self.end(target))
            val = sub(rhs.extent.start.offset, self.end(rhs))
            return f"{h}(&({ptr}), {val}, _gr_s, {sl}u, {ss}u)"

        self.parts(c)
        self.visit(rhs, RV)
        self.edits.append(Edit(node.extent.start.offset, self.end(node), build))

    def incdec(self, node, sub_, op: str, prefix: bool) -> None:
        c, space, sel, base = self.access_info(sub_)
        s, e = c.extent.start.offset, self.end(c)
        sl = self.site(Kind.LOAD, s, e, self.var_of(c))
        ss = self.site(Kind.STORE, s, e, self.var_of(c))
        h = self.rmw_helper(
            c, sel, base, int(space), ("pre" if prefix else "post") + op, None, "inc"
        )
        target = base if sel else c

        def build(sub, h=h, target=target):
            ptr = sub(target.extent.start.offset, self.end(target))
            return f"{h}(&({ptr}), _gr_s, {sl}u, {ss}u)"

        self.parts(c)
        self.edits.append(Edit(node.extent.start.offset, self.end(node), build))

    # ------------------------------------------------------------------ calls
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
            self.note(
                c.extent.start.offset,
                f"'{name}' is defined in {where}: functions outside the checked file are "
                "not instrumented",
            )
            return
        if name in ("barrier", "work_group_barrier", "wait_group_events"):
            self.barrier(c, callee, args, name)
        elif atomic_op(name) is not None:
            self.atomic(c, callee, args, name)
        elif VLOAD.match(name):
            self.vloadstore(c, callee, args, name)
        elif name in ("async_work_group_copy", "async_work_group_strided_copy"):
            self.async_copy(c, callee, args, name)
        elif re.match(r"^(read|write)_image|^(read|write|reserve|commit)_pipe", name):
            self.note(c.extent.start.offset, f"'{name}': image and pipe accesses are not tracked")

    def call_edit(self, c, callee, helper: str, tail: str) -> None:
        lp = self.skip_to(self.end(callee), "(")
        end = self.end(c) - 1
        sep = ", " if self.text[lp + 1 : end].strip() else ""

        def build(sub, lp=lp, end=end):
            return f"{helper}({sub(lp + 1, end)}{sep}{tail})"

        self.edits.append(Edit(c.extent.start.offset, self.end(c), build))


def instrument(source: str, path: str, options: Sequence[str] = ()) -> Instrumented:
    """Rewrite an OpenCL C program (docs/internals.md §5); GpuraceError if it does not
    parse. `Instrumented.source` still holds the user's preprocessor directives: build
    it with the same -D/-I options."""
    tu = frontend.parse(source, path, options)
    text, smap = frontend.expand_access_macros(tu, path, source, tracked_space)
    if text != source:
        tu = frontend.parse(text, path, options)
    return Rewriter(text, smap, tu, path).run()
