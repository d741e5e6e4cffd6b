"""Run a cupy program (or ``gpurace run`` on one) on a machine without an NVIDIA GPU.

``python tests/run_programs/cupy_boot.py gpurace run [OPTIONS] -- python app.py ARGS``
runs gpurace's own CLI, and ``python tests/run_programs/cupy_boot.py app.py ARGS`` the
program alone, after installing tests/fake_cupy.py as ``cupy`` (kernels compiled by
NVRTC and run on the PTX interpreter) for both the program and gpurace's CUDA
backend, whose analysis kernels run on PoCL (as the ``pocl_analysis`` fixture of
tests/test_cuda_backend_host.py does). Nothing else is changed: the program's
``import cupy`` and gpurace's hooks see that module as they would see cupy.
"""

from __future__ import annotations

import os
import runpy
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import gpurace.backends  # noqa: E402,F401  (the OpenCL drivers first, as gpurace run does)
from tests import fake_cupy  # noqa: E402

sys.modules["cupy"] = fake_cupy


def _pocl_analysis() -> None:
    import numpy as np

    from gpurace.backends import cuda_backend, opencl_backend
    from gpurace.model import RECORD_WORDS

    queue = opencl_backend.get_device("Portable Computing Language")[0]

    def analyse(device, log, n, bases, uniform, **kw):
        buf = None  # a prefiltered launch that logged nothing has no log
        if log is not None:
            records = np.asarray(log[: max(1, n) * RECORD_WORDS]).reshape(-1, RECORD_WORDS)
            buf = opencl_backend.upload_log(queue, records)
        return opencl_backend.analyse_on_device(queue, buf, n, bases, uniform, **kw)

    cuda_backend.analyse_on_device = analyse


if __name__ == "__main__":
    if sys.argv[1:2] == ["gpurace"]:
        _pocl_analysis()
        from gpurace.cli import main

        sys.argv = ["gpurace", *sys.argv[2:]]
        main()
    else:
        sys.argv = sys.argv[1:]
        sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
        runpy.run_path(sys.argv[0], run_name="__main__")
