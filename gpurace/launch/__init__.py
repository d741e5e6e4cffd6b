"""Launch files: the buffers, grid and entry point of one kernel launch.

A check runs the user's kernel on real inputs, so it needs to know how many
work-groups to launch and what every bound buffer holds. That is described by a
small TOML file (docs/launch-files.md) or, from Python, by ``LaunchSpec.from_dict``.
An OpenCL launch file (``kernel``, ``global_size``, ``[[arg]]`` ...) fills the same
LaunchSpec plus its OpenCL fields; ``validate_opencl`` checks it against the kernel's
parameters. Oclgrind's ``.sim`` files load through ``gpurace.launch.sim``.

Every problem is reported as a ``GpuraceError`` naming the launch file and, where
it can be found, the line of the offending key, because the user's next step is to
open that file and fix that line. ``tomllib`` keeps no positions, so lines are
recovered by scanning the raw text table by table (``KeyLines``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .opencl import (  # noqa: F401 - the package's API
    _CL_TOP_KEYS,
    ArgDialect,
    _build_opencl,
    cl_type_name,
    parse_args,
    scalar_bytes,
    validate_opencl,
)
from .spec import (  # noqa: F401 - the package's API
    CL_SCALARS,
    DTYPES,
    ArgSpec,
    BufferSpec,
    LaunchSpec,
    element_type,
)
from .tables import KeyLines, read_toml  # noqa: F401 - the package's API
from .wgsl import (  # noqa: F401 - the package's API
    _build,
    _type_hint,
    resolve_entry,
    validate_against,
)


def build(data: Mapping[str, Any], path: str, base_dir: str | None, lines: KeyLines) -> LaunchSpec:
    """A launch from a launch file's table: OpenCL's form if it has OpenCL's keys."""
    if isinstance(data, Mapping) and any(key in data for key in _CL_TOP_KEYS[:5]):
        return _build_opencl(data, path, base_dir, lines)
    return _build(data, path, base_dir, lines)


def load_launch(path: str | os.PathLike[str]) -> LaunchSpec:
    """Read and check a launch file; every problem is a GpuraceError naming its line."""
    path = os.fspath(path)
    data, text = read_toml(path)
    return build(data, path, None, KeyLines(text))
