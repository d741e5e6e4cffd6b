"""WGSL rewriter: ``instrument(source, path) -> Instrumented`` (docs/internals.md §2)."""

from .instrument import instrument

__all__ = ["instrument"]
