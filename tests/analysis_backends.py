"""The backends whose on-device analysis the differential tests compare with the
reference: one interface, so each test body is written once for all of them."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import numpy as np

from gpurace.backends import analysis_driver, opencl_backend, wgpu_backend
from tests.logs import VAR_BASES


@dataclass(frozen=True)
class AnalysisBackend:
    """A backend module (wgpu_backend, opencl_backend) with its device or queue."""

    name: str
    module: ModuleType
    device: object
    limit_hook: str  # the module's function giving one analysis buffer's most bytes

    def analyse_records(
        self, log: np.ndarray, uniform_race: bool = False, **options
    ) -> analysis_driver.DeviceAnalysis:
        """The whole log in one pass; `options`: more of `analysis_driver.analyse`'s."""
        return self.module.analyse_records(self.device, log, VAR_BASES, uniform_race, **options)

    def analyse_range(
        self, log: np.ndarray, address_range: tuple[int, int], **options
    ) -> analysis_driver.DeviceAnalysis:
        """One pass over `address_range` of a random log (tests.logs: 3 groups of 4)."""
        options = {"address_end": 3 << 16, "wgsize": 4, "groups": 3} | options
        buf = self.module.upload_log(self.device, log)
        return self.module.analyse_on_device(
            self.device, buf, len(log), VAR_BASES, False, address_range=address_range, **options
        )


def wgpu() -> AnalysisBackend:
    """The WGSL kernels on the default wgpu device (lavapipe here)."""
    return AnalysisBackend("wgpu", wgpu_backend, wgpu_backend.get_device()[0], "analysis_limit")


def opencl() -> AnalysisBackend:
    """The C kernels (shaders/analysis.cl) on PoCL, the CPU OpenCL device."""
    queue = opencl_backend.get_device("Portable Computing Language")[0]
    return AnalysisBackend("opencl", opencl_backend, queue, "analysis_limit")
