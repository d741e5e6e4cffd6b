"""Race analysis: the NumPy reference (the oracle) and helpers shared with backends."""

from gpurace.analysis.reference import analyse

__all__ = ["analyse"]
