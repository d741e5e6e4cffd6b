"""An entry's tracked variables (pointer parameters, module ``.global`` variables it
uses, its ``.shared`` variables) and its parameters as Bindings."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpurace.model import Binding, Space, TrackedVar

from .parse import TYPE_BYTES, Function, Module, parse_instr, var_size
from .source import CudaSource


@dataclass
class Var:
    """A tracked variable of one entry: how the prologue finds its base address."""

    id: int
    space: Space
    base: str  # PTX that sets %_gr_b{id}
    name: str
    tmem: bool = False  # tensor memory (tmem.py): records by row and column, never by address


def plan_vars(
    mod: Module, fn: Function, variables: list[TrackedVar], source: CudaSource | None
) -> tuple[list[Var], list[Binding]]:
    """The entry's tracked variables (pointer parameters, module ``.global`` variables
    it uses, its ``.shared`` variables) and its parameters as Bindings."""
    body_text = " ".join(s.text for s in fn.body)
    pointers = _pointer_params(fn)
    sig = source.kernel_params(fn.name, len(fn.params)) if source else None
    vars_: list[Var] = []
    bindings: list[Binding] = []
    for p in fn.params:
        cname, ctype = sig[p.index] if sig else (None, None)
        name = cname or p.name
        is_ptr = (
            p.type in ("u64", "b64", "s64")
            and not p.array
            and (p.index in pointers or p.ptr or (ctype is not None and "*" in ctype))
        )
        if ctype is not None and "*" not in ctype and p.index not in pointers:
            is_ptr = False
        elem, stride = CudaSource.elem_of(ctype) if ctype else ("", 0)
        if is_ptr:
            vid = len(variables)
            variables.append(
                TrackedVar(vid, name, Space.GLOBAL, 0, p.index, None, stride, elem, kernel=fn.name)
            )
            vars_.append(
                Var(
                    vid,
                    Space.GLOBAL,
                    f"ld.param.u64 %_gr_b{vid}, [{p.name}];\n"
                    f"cvta.to.global.u64 %_gr_b{vid}, %_gr_b{vid};",
                    name,
                )
            )
            bindings.append(
                Binding(0, p.index, name, "global", "read_write", None, stride, elem, vid)
            )
        else:
            nbytes = TYPE_BYTES.get(p.type, 0) * (int(p.array[1:-1]) if p.array[1:-1] else 1)
            # a scalar's elem_type is its PTX type (u32, s32, f32, u64, ...): how to pack it
            bindings.append(
                Binding(0, p.index, name, "scalar", "read", nbytes, nbytes, p.type, None)
            )
    used = set(re.findall(r"[\w$]+", body_text))
    for name, (size, _align) in mod.globals.items():
        if name in used:
            vid = len(variables)
            variables.append(
                TrackedVar(vid, name, Space.GLOBAL, None, None, size, size or 1, "", kernel=fn.name)
            )
            vars_.append(Var(vid, Space.GLOBAL, f"mov.u64 %_gr_b{vid}, {name};", name))
    local_shared = {}
    for s in fn.body:
        if s.kind == "stmt" and re.match(r"\.shared\s", s.text):
            m = re.match(
                r"\.shared\s+(?:\.align\s+\d+\s+)?(?:\.v(\d)\s+)?\.(\w+)\s+([\w$]+)((?:\[\d*\])*)",
                s.text,
            )
            if m:
                local_shared[m.group(3)] = var_size(m.group(2), m.group(1), m.group(4))
    shared = {**{k: v[0] for k, v in mod.shared.items() if k in used}, **local_shared}
    for name, size in shared.items():
        cname = CudaSource.demangle_shared(name)
        elem, stride = source.shared_elem(cname) if source else ("", 0)
        vid = len(variables)
        variables.append(
            TrackedVar(vid, cname, Space.LOCAL, None, None, size, stride or 1, elem, kernel=fn.name)
        )
        vars_.append(
            Var(
                vid,
                Space.LOCAL,
                f"mov.u32 %_gr_t0, {name};\ncvt.u64.u32 %_gr_b{vid}, %_gr_t0;",
                cname,
            )
        )
    return vars_, bindings


def _pointer_params(fn: Function) -> set[int]:
    """Parameters whose value reaches the address of a memory instruction (through
    moves, adds and address conversions): the kernel's pointer parameters."""
    index = {p.name: p.index for p in fn.params}
    taint: dict[str, set[int]] = {}
    found: set[int] = set()
    instrs = [
        parse_instr(s.text) for s in fn.body if s.kind == "stmt" and not s.text.startswith(".")
    ]
    for _ in range(2):
        for ins in instrs:
            if not ins.operands:
                continue
            if ins.op == "ld" and ins.has("param"):
                m = re.match(r"\[\s*([\w$]+)\s*(?:\+\s*\d+)?\s*\]", ins.operands[-1])
                if m and m.group(1) in index:
                    taint.setdefault(ins.operands[0], set()).add(index[m.group(1)])
                continue
            if ins.op in ("ld", "st", "atom", "red", "cp", "ldu", "prefetch", "isspacep"):
                for o in ins.operands:
                    m = re.match(r"\[\s*([%\w$]+)", o)
                    if m and m.group(1) in taint:
                        found |= taint[m.group(1)]
                if ins.op == "isspacep" and len(ins.operands) > 1:
                    found |= taint.get(ins.operands[1], set())
                continue
            if ins.op in ("mov", "add", "sub", "cvta", "cvt", "mad", "selp", "max", "min"):
                # `a - b` and `a * b + c` are pointers through `a` and `c` only: Numba
                # subtracts and multiplies by its strides (parameters too) in addresses
                froms = {"sub": ins.operands[1:2], "mad": ins.operands[3:4]}
                srcs = set()
                for o in froms.get(ins.op, ins.operands[1:]):
                    srcs |= taint.get(o, set())
                if srcs:
                    taint.setdefault(ins.operands[0], set()).update(srcs)
    return found
