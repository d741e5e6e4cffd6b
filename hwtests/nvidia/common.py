"""The CUDA check through the language-neutral pass loop of `gpurace.api.check`.

Until the lead wires CUDA into `api.check` (prepare = {..., "cuda":
cuda_backend.make_target}, language_of: .cu/.ptx -> "cuda"), `check_cuda` routes
api.check's target preparation to `cuda_backend.make_target` for one call: the pass
loop, log sizing, range splits and scope statement are api.check's own.
"""

from __future__ import annotations

from unittest.mock import patch

from gpurace import api
from gpurace.backends import cuda_backend
from gpurace.model import Report


def check_cuda(source: str, launch, path: str, **options) -> Report:
    with patch.object(api, "_wgsl_target", cuda_backend.make_target):
        return api.check(source, launch, path=path, language="wgsl", **options)
