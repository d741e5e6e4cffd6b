"""What the CUDA source adds to the PTX: parameter names and types, ``__shared__``
element types and the text of each line, for reports ("'tile[37]'", "'out[5]'").

This is a light scan (no C++ parser): when it finds nothing the PTX names are used
(``k_param_0``, ``_ZZ1kE4tile``) and elements are bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..source_text import matching_paren, split_top_level

C_TYPES: dict[str, int] = {
    "char": 1, "signed char": 1, "unsigned char": 1, "int8_t": 1, "uint8_t": 1, "bool": 1,
    "short": 2, "unsigned short": 2, "int16_t": 2, "uint16_t": 2, "__half": 2, "half": 2,
    "__nv_bfloat16": 2, "nv_bfloat16": 2,
    "int": 4, "unsigned": 4, "unsigned int": 4, "uint": 4, "int32_t": 4, "uint32_t": 4,
    "float": 4, "__half2": 4, "half2": 4, "__nv_bfloat162": 4,
    "long long": 8, "unsigned long long": 8, "int64_t": 8, "uint64_t": 8, "size_t": 8,
    "long": 8, "unsigned long": 8, "double": 8,
    "float2": 8, "int2": 8, "uint2": 8, "float3": 12, "int3": 12, "uint3": 12,
    "float4": 16, "int4": 16, "uint4": 16, "double2": 16,
}  # fmt: skip
_QUALIFIERS = ("const", "volatile", "__restrict__", "__restrict", "restrict", "struct")


def _mangled_base(name: str) -> str:
    m = re.match(r"_Z(\d+)", name)
    if m:
        n = int(m.group(1))
        return name[m.end() : m.end() + n]
    return name


@dataclass
class CudaSource:
    """A CUDA source file as given (path as the user wrote it)."""

    path: str
    text: str

    def line(self, n: int) -> str:
        lines = self.text.splitlines()
        return lines[n - 1] if 0 < n <= len(lines) else ""

    def kernel_params(self, entry: str, count: int) -> list[tuple[str, str]] | None:
        """[(name, C type)] of the ``__global__`` function `entry` (mangled or not),
        if the source has one with `count` parameters."""
        base = _mangled_base(entry)
        text = _strip_comments(self.text)
        for m in re.finditer(rf"__global__[^;{{]*?\b{re.escape(base)}\s*\(", text):
            close = matching_paren(text, m.end() - 1)
            if close < 0:
                continue
            args = text[m.end() : close]
            parts = [p.strip() for p in _top_split(args) if p.strip() and p.strip() != "void"]
            if len(parts) != count:
                continue
            out = []
            for p in parts:
                p = re.sub(r"=.*$", "", p).strip()
                nm = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\])?$", p)
                name = nm.group(1) if nm else ""
                ctype = p[: nm.start()].strip() if nm else p
                if nm and nm.group(2):
                    ctype += "*"
                out.append((name, ctype))
            return out
        return None

    @staticmethod
    def elem_of(ctype: str) -> tuple[str, int]:
        """(element type, bytes) a pointer of C type `ctype` points to (0: unknown)."""
        t = ctype.replace("*", " ").replace("&", " ")
        words = [w for w in t.split() if w not in _QUALIFIERS]
        base = " ".join(words)
        return base, C_TYPES.get(base, 0)

    def shared_elem(self, name: str) -> tuple[str, int]:
        """Element type and size of the ``__shared__`` array `name`."""
        text = _strip_comments(self.text)
        m = re.search(rf"__shared__\s+([\w:\s<>]+?)\s+{re.escape(name)}\s*\[", text)
        if not m:
            return "", 0
        words = [w for w in m.group(1).split() if w not in _QUALIFIERS + ("extern",)]
        base = " ".join(words)
        return base, C_TYPES.get(base, 0)

    def kernel_templates(self) -> list[tuple[str, str, int, int]]:
        """(name, example instantiation, line, col) of each ``__global__`` template:
        NVRTC emits no kernel for a template nobody instantiates."""
        text = _strip_comments(self.text)
        out = []
        pat = (
            r"\btemplate\s*<([^{};]*?)>\s*(?:static\s+|inline\s+)*__global__\s+[\w\s]*?\b(\w+)\s*\("
        )
        for m in re.finditer(pat, text):
            args = []
            for p in _top_split(m.group(1)):
                words = p.split("=")[0].split()
                args.append("float" if words and words[0] in ("typename", "class") else "1")
            line = text.count("\n", 0, m.start()) + 1
            col = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
            out.append((m.group(2), f"{m.group(2)}<{', '.join(args)}>", line, col))
        return out

    @staticmethod
    def demangle_shared(name: str) -> str:
        """``_ZZ1kE4tile`` (a __shared__ variable of kernel k) -> ``tile``."""
        m = re.match(r"_ZZ.*?E(\d+)", name)
        if m:
            n = int(m.group(1))
            return name[m.end() : m.end() + n] or name
        return name


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", lambda m: " " * len(m.group(0)), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _top_split(s: str) -> list[str]:
    """A C++ parameter list cut at its top-level commas (template ``<...>`` nest)."""
    return split_top_level(s, "(<[", ")>]")
