"""WGSL rewriter: ``instrument(source, path) -> Instrumented`` (docs/internals.md §2).

Loaded on first use of ``instrument``: the package's light modules (``loops``: the
report's loop-cut notes) are imported by every check, a CUDA or OpenCL one too,
which should not pay for the WGSL parser."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # import it from here, not from the submodule of the same name
    from .instrument import instrument as instrument

__all__ = ["instrument"]


def __getattr__(name: str) -> Any:
    if name == "instrument":
        from .instrument import instrument as fn

        globals()["instrument"] = fn  # (importing the submodule bound its module here)
        return fn
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
