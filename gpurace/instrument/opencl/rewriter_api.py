"""What the Rewriter's mixins (accesses.py, builtins.py) rely on from the Rewriter
(rewriter.py), declared once so that a type checker can follow them. At run time the
class is empty: the annotations create no attributes and the method signatures exist
only for the type checker; Rewriter defines them all."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpurace.model import Event, Kind, Site

from .edits import Edit


class RewriterAPI:
    """Base of the Rewriter's mixins: the Rewriter's state and utilities they use."""

    K: Any  # libclang's CursorKind (clang.cindex has no type hints)
    text: str
    path: str
    edits: list[Edit]
    sites: list[Site]
    event_sites: dict[int, int]
    user_functions: set[str]
    uses_copies: bool
    uses_order: bool
    macro_uses: list[tuple[int, int]]
    # while a store's right-hand side is visited: its lvalue (accesses.then_store_key)
    then_store: tuple[str, int, str] | None
    then_loads: int  # loads marked ACC_THEN_STORE so far (`store` counts its right-hand side's)

    if TYPE_CHECKING:

        def src(self, c) -> str: ...

        def end(self, c) -> int: ...

        def note(self, offset: int, what: str) -> None: ...

        def site(
            self, kind: Kind, start: int, end: int, var: str, event: Event | None = None
        ) -> int: ...

        def helper(self, key: str, make) -> str: ...

        def children(self, c) -> list: ...

        def op_between(self, lhs, rhs) -> str: ...

        def strip(self, c): ...

        def root_name(self, text: str) -> str: ...

        def insert(self, offset: int, text: str) -> None: ...

        def skip_to(self, pos: int, ch: str) -> int: ...

        def visit(self, c, ctx: str, kernel: bool = False) -> None: ...

        def parts(self, c, kernel: bool = False) -> None: ...

        def access_info(self, c): ...

        def var_of(self, c) -> str: ...

        def slot_hint(self, sid: int, c) -> int: ...
