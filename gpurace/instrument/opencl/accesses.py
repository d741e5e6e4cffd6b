"""The helpers of plain accesses to tracked memory: loads, stores, compound
assignments and increments of scalars, vectors (and their components) and structs
(one record per leaf). A mixin of the Rewriter (rewriter.py): each method adds the
access's sites and the edit that calls its generated helper."""

from __future__ import annotations

import re

from gpurace.abi import ACC_THEN_STORE
from gpurace.model import Kind

from .builtins import RV
from .edits import Edit
from .rewriter_api import RewriterAPI
from .runtime import PS
from .types import access_size, c_type, is_record, leaves, own_space, pointer_to

#: calls a store's right-hand side may make and still mark its loads ACC_THEN_STORE:
#: work-item functions, which neither touch memory nor wait at a barrier
PURE_CALLS = frozenset(
    f"get_{n}"
    for n in (
        "global_id local_id group_id global_size local_size num_groups global_offset "
        "work_dim enqueued_local_size global_linear_id local_linear_id"
    ).split()
)

_COMPONENTS = {"x": 0, "y": 1, "z": 2, "w": 3, "r": 0, "g": 1, "b": 2, "a": 3}


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


def acc_line(
    off: int, size: int, kind: int, site: str, sp: int, value: str | None, marked: bool = False
) -> str:
    """A helper's `_gr_acc` call for the `size` bytes at byte `off` of the access at
    `p` (with the stored bytes of `value` for a store): one record line, whatever
    part of the access (a record leaf, a run of vector components) it logs. It sets
    the helper's `oob` when the part is out of bounds (docs/memcheck.md): the helper
    then leaves out the access (OOB_HEAD declares it). `marked`: a store whose
    assignment's load of the same lvalue is marked ACC_THEN_STORE."""
    bytes_ = f"(const __private uchar *)&{value} + {off}" if value else "0"
    known = "1u" if value else "0u"
    # a load first asks _gr_elided whether _gr_acc would do nothing for it, a marked
    # store _gr_marked whether its load made its marks
    skip = f"if (!_gr_elided(s, (ulong)p + {off}u, {sp}u, {size}u, {site})) " if kind == 0 else ""
    skip = f"if (!_gr_marked(s, (ulong)p + {off}u)) " if marked else skip
    return (
        f"  {skip}oob |= _gr_acc(s, (ulong)p + {off}u, {sp}u, {size}u, _GR_SITE({site}), {kind}u, "
        f"{bytes_}, {known}, 0u);"
    )


#: the first line of a helper whose accesses acc_line logs
OOB_HEAD = "  uint oob = 0u;\n"


def zero(T: str, record: bool) -> str:
    """Statements that return a zero `T`: what a read out of bounds gives."""
    if not record:
        return f"return ({T})(0);"
    return (
        f"{{ {T} z; for (uint k = 0u; k < sizeof({T}); k++) ((__private uchar *)&z)[k] = 0; "
        "return z; }"
    )


def lvalue_text(text: str) -> str:
    """An lvalue's text without blanks or enclosing parentheses: what two uses of the
    same lvalue in one full expression share (`y[i]`, `y[ i ]`, `(y[i])`)."""
    t = re.sub(r"\s+", "", text)
    while t.startswith("(") and t.endswith(")") and _balanced(t[1:-1]):
        t = t[1:-1]
    return t


def _balanced(t: str) -> bool:
    depth = 0
    for ch in t:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


class AccessHelpers(RewriterAPI):
    """Mixin of the Rewriter: the helper of each kind of plain access."""

    def leaf_lines(
        self, t, kind: int, site: str, sp: int, value: str | None, marked: bool = False
    ) -> list[str]:
        ls = leaves(t) if is_record(t) else [(0, access_size(t))]
        return [acc_line(off, size, kind, site, sp, value, marked) for off, size in ls]

    def run_lines(
        self, vt, indices, kind, site, sp, value: str | None, marked: bool = False
    ) -> list[str]:
        es = vt.get_canonical().element_type.get_size()
        return [
            acc_line(first * es, n * es, kind, site, sp, value, marked)
            for first, n in runs(indices)
        ]

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

            def make_vec(name, VT=VT, ST=ST, idx=idx, sel=sel):
                body = self.run_lines(vt, idx, 0, "site", sp, None)
                return (
                    f"{ST} {name}(const {self.pquals(vt)} {VT} *p, {PS}s, uint site) {{\n"
                    + OOB_HEAD
                    + "\n".join(body)
                    + f"\n  if (oob) {zero(ST, False)}\n  return (*p).{sel};\n}}"
                )

            h = self.helper(f"ldv|{VT}|{sel}|{self.pquals(vt)}", make_vec)
            b = base
            sid = self.slot_hint(sid, b)

            def build_vec(sub, h=h, b=b, sid=sid):
                return f"{h}(&({sub(b.extent.start.offset, self.end(b))}), _gr_s, {sid}u)"

            self.parts(c)
            self.edits.append(Edit(c.extent.start.offset, self.end(c), build_vec))
            return
        T = c_type(c.type)
        # the lvalue a store in this full expression writes later (docs/internals.md §5)
        kind = ACC_THEN_STORE if self.then_store == (lvalue_text(self.src(c)), sp, T) else 0
        self.then_loads += kind == ACC_THEN_STORE

        def make(name, T=T, t=c.type, kind=kind):
            body = self.leaf_lines(t, kind, "site", sp, None)
            return (
                f"{T} {name}({pointer_to(T, 'const ' + self.pquals(t))}p, {PS}s, uint site) {{\n"
                + OOB_HEAD
                + "\n".join(body)
                + f"\n  if (oob) {zero(T, is_record(t))}\n  return *p;\n}}"
            )

        h = self.helper(f"ld|{T}|{self.pquals(c.type)}|{kind}", make)
        sid = self.slot_hint(sid, c)

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
        self.parts(c)
        outer, loads = self.then_store, self.then_loads
        self.then_store = None if sel else self.then_store_key(node, c, sp)
        try:
            self.visit(rhs, RV)
        finally:
            self.then_store = outer
        marked = self.then_loads > loads  # its right-hand side loads what it stores
        if sel:
            vt = base.type
            VT, ST = c_type(vt), c_type(c.type)
            idx = swizzle(sel, vt.get_canonical().element_count)

            def make_vec(name, VT=VT, ST=ST, idx=idx, sel=sel, vt=vt):
                body = self.run_lines(vt, idx, 1, "site", sp, "t")
                return (
                    f"{ST} {name}({self.pquals(vt)} {VT} *p, {ST} v, {PS}s, uint site) {{\n"
                    + OOB_HEAD
                    + f"  {VT} t = ({VT})(0);\n  t.{sel} = v;\n"
                    + "\n".join(body)
                    + f"\n  if (!oob) (*p).{sel} = v;\n  return v;\n}}"
                )

            h = self.helper(f"stv|{VT}|{sel}|{self.pquals(vt)}", make_vec)
        else:
            T = c_type(c.type)

            def make(name, T=T, t=c.type):
                body = self.leaf_lines(t, 1, "site", sp, "v", marked)
                return (
                    f"{T} {name}({pointer_to(T, self.pquals(t))}p, {T} v, {PS}s, uint site) {{\n"
                    + OOB_HEAD
                    + "\n".join(body)
                    + "\n  if (!oob) *p = v;\n  return v;\n}"
                )

            h = self.helper(f"st|{T}|{self.pquals(c.type)}|{marked}", make)
        ctype = c.type
        sid = self.slot_hint(sid, target)

        def build(sub, h=h, target=target, rhs=rhs, sid=sid):
            ptr = sub(target.extent.start.offset, self.end(target))
            val = self.cast(ctype, sub(rhs.extent.start.offset, self.end(rhs)))
            return f"{h}(&({ptr}), {val}, _gr_s, {sid}u)"

        self.edits.append(Edit(node.extent.start.offset, self.end(node), build))

    def then_store_key(self, node, lhs, sp: int) -> tuple[str, int, str] | None:
        """What a load in assignment `node`'s right-hand side must match to be marked
        ACC_THEN_STORE: the stored lvalue's text, space and type, when the assignment
        changes nothing else before its store (no call but a work-item function, no
        assignment, increment or decrement, no macro left unexpanded), so that a load of
        the same text reads the bytes the store then writes. Only a build run's shadow
        marks use it, and a mark made early is never wrong: were the addresses to
        differ, the store would still make its own (docs/internals.md §5)."""
        s, e = node.extent.start.offset, self.end(node)
        if is_record(lhs.type) or any(ms < e and s < me for ms, me in self.macro_uses):
            return None
        K = self.K
        todo = [*self.children(node)]
        while todo:
            c = todo.pop()
            k = c.kind
            if (
                (k == K.CALL_EXPR and c.spelling not in PURE_CALLS)
                or k == K.COMPOUND_ASSIGNMENT_OPERATOR
                or k.is_statement()
                or (k == K.BINARY_OPERATOR and self.op_between(*self.children(c)) == "=")
                or (k == K.UNARY_OPERATOR and ("++" in self.src(c) or "--" in self.src(c)))
            ):
                return None
            todo.extend(self.children(c))
        return lvalue_text(self.src(lhs)), sp, c_type(lhs.type)

    def rmw_helper(self, c, sel, base, sp, op: str, vtype, key: str) -> str:
        """Helper for `x op= v` (vtype given) or `++`/`--` (op "pre++" etc.)."""
        if sel:
            vt = base.type
            VT, ST = c_type(vt), c_type(c.type)
            idx = swizzle(sel, vt.get_canonical().element_count)
            ld = self.run_lines(vt, idx, ACC_THEN_STORE, "sl", sp, None)
            stl = self.run_lines(vt, idx, 1, "ss", sp, "t", marked=True)
            read, write = f"(*p).{sel}", f"(*p).{sel} = r;"
            ptype, T = f"{self.pquals(vt)} {VT} *", ST
            fill = f"  {VT} t = ({VT})(0);\n  t.{sel} = r;\n"
        else:
            T = c_type(c.type)
            ld = self.leaf_lines(c.type, ACC_THEN_STORE, "sl", sp, None)
            stl = self.leaf_lines(c.type, 1, "ss", sp, "r", marked=True)
            read, write = "*p", "*p = r;"
            ptype = pointer_to(T, self.pquals(c.type))
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
            # out of bounds: the load gives zero, the store is left out (both recorded)
            return (
                f"{T} {name}({ptype}p{arg}, {PS}s, uint sl, uint ss) {{\n"
                + OOB_HEAD
                + "\n".join(ld)
                + f"\n  {T} old = oob ? ({T})(0) : {read};\n  {T} r = old;\n"
                + apply_
                + fill
                + "\n".join(stl)
                + f"\n  if (!oob) {write}\n  return {ret};\n}}"
            )

        return self.helper(f"rmw|{key}|{ptype}|{sel}|{op}|{arg}", make)

    def rmw(self, node, lhs, rhs, op: str) -> None:
        c, space, sel, base = self.access_info(lhs)
        s, e = c.extent.start.offset, self.end(c)
        sl = self.site(Kind.LOAD, s, e, self.var_of(c))
        ss = self.site(Kind.STORE, s, e, self.var_of(c))
        h = self.rmw_helper(c, sel, base, int(space), op, rhs.type, "cmp")
        target = base if sel else c
        sl, ss = self.slot_hint(sl, target), self.slot_hint(ss, target)

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
        sl, ss = self.slot_hint(sl, target), self.slot_hint(ss, target)

        def build(sub, h=h, target=target):
            ptr = sub(target.extent.start.offset, self.end(target))
            return f"{h}(&({ptr}), _gr_s, {sl}u, {ss}u)"

        self.parts(c)
        self.edits.append(Edit(node.extent.start.offset, self.end(node), build))
