"""The OpenCL C rewriter (docs/internals.md §5)."""
