"""The OpenCL C rewriter (docs/internals.md §5)."""

from .rewriter import instrument

__all__ = ["instrument"]
