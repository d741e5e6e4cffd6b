"""Module-wide state of one rewrite: site ids, skipped accesses, specialisations.

Every function rewriter of a module shares one :class:`ModuleRewriter`: the site
table (so that a site id means the same position in every function), the runtime
helpers generated so far (emitted once, after the prelude), the list of what was
left uninstrumented, and the per-call-shape specialisations of functions with
``ptr<storage|workgroup>`` parameters (which naga rejects), queued until the
driver rewrites them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpurace.model import Event, Kind, Site

from . import ast as A
from .loops import LoopMarks
from .printer import attrs_text, expr_text
from .runtime import Path, Runtime
from .semantics import ModuleScope


class SiteTable:
    """Allocates site ids: one per (position, kind, variable, event), in first-use order."""

    def __init__(self, source: str, path: str, line_of: Callable[[int], tuple[int, int]]):
        self.source = source
        self.path = path
        self.line_of = line_of
        self.lines = source.splitlines()
        self.sites: list[Site] = []
        self._ids: dict[tuple, int] = {}

    def get(
        self,
        kind: Kind,
        offset: int,
        end: int,
        var: str = "",
        event: Event | None = None,
        operand: str | None = None,
    ) -> int:
        line, col = self.line_of(offset)
        key = (line, col, int(kind), var, event)
        sid = self._ids.get(key)
        if sid is None:
            sid = len(self.sites)
            self._ids[key] = sid
            text = self.lines[line - 1].strip() if line - 1 < len(self.lines) else ""
            op = " ".join((operand if operand is not None else self.source[offset:end]).split())
            self.sites.append(Site(sid, self.path, line, col, kind, op, text, var, event))
        return sid


class ModuleRewriter:
    """Holds the module-wide state: scope, sites, runtime helpers, specialisations."""

    def __init__(
        self,
        scope: ModuleScope,
        source: str,
        path: str,
        sites: SiteTable,
        functions: dict[str, A.Function],
    ):
        self.scope = scope
        self.source = source
        self.path = path
        self.sites = sites
        self.runtime = Runtime()
        self.loops = LoopMarks()  # every loop's id and site (loops.py)
        self.functions = functions
        self.not_instrumented: list[str] = []
        self._specs: dict[tuple, str] = {}
        self.pending: list[tuple[A.Function, str, dict[str, Path]]] = []

    def skip(self, node: A.Node, what: str) -> None:
        line, col = self.sites.line_of(node.start)
        msg = f"{self.path}:{line}:{col}: {what}"
        if msg not in self.not_instrumented:
            self.not_instrumented.append(msg)

    def plain_stmt(self, s: A.Stmt) -> str:
        """The original text of a statement that could not be instrumented."""
        text = self.source[s.start : s.end]
        return text if text.endswith((";", "}")) else text + ";"

    def specialize(self, fn: A.Function, spec: dict[str, Path]) -> str:
        key = (fn.name,) + tuple(sorted((k, p.shape()) for k, p in spec.items()))
        name = self._specs.get(key)
        if name is None:
            name = f"_gr_f{len(self._specs)}_{fn.name}"
            self._specs[key] = name
            aliases: dict[str, Path] = {}
            for pname, p in spec.items():
                q = p.copy()
                for k, s in enumerate(q.dynamic()):
                    s.text = f"_gr_{pname}_{k}"
                aliases[pname] = q
            self.pending.append((fn, name, aliases))
        return name

    def signature(
        self, fn: A.Function, name: str, aliases: dict[str, Path], extra_params: Sequence[str] = ()
    ) -> str:
        params = []
        for p in fn.params:
            if p.name in aliases:
                for k, s in enumerate(aliases[p.name].dynamic()):
                    params.append(f"_gr_{p.name}_{k}: {s.itype}")
            else:
                params.append(f"{attrs_text(p.attrs)}{p.name}: {expr_text(p.type)}")
        params += list(extra_params)
        head = f"{attrs_text(fn.attrs) if not aliases else ''}fn {name}({', '.join(params)})"
        if fn.ret is not None:
            head += f" -> {attrs_text(fn.ret_attrs)}{expr_text(fn.ret)}"
        return head
