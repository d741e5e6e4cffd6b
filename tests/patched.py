"""A Backend with some of its operations replaced, for tests to inject through
``api.check(..., backend=Patched(wgpu_backend, launch=counted))`` instead of patching
the backend module's globals (`gpurace.interfaces.Backend`)."""

from __future__ import annotations

from typing import Any


class Patched:
    """`real` (a backend module), except for the operations given by keyword."""

    def __init__(self, real: Any, **replaced: Any) -> None:
        self._real = real
        self._replaced = replaced

    def __getattr__(self, name: str) -> Any:
        if name in self._replaced:
            return self._replaced[name]
        return getattr(self._real, name)
