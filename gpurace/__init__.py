from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # Lazy, so that ``import gpurace`` (and the CLI's --help) does not load NumPy or
    # a GPU API until the determinism API is actually used.
    if name == "repeat":
        from gpurace.determinism import repeat

        return repeat
    raise AttributeError(f"module 'gpurace' has no attribute {name!r}")
