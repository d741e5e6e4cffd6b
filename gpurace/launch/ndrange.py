"""An OpenCL NDRange and its work-groups, uniform or not (docs/internals.md, "Non-uniform
work-groups").

OpenCL C 2.0 and later (without ``-cl-uniform-work-group-size``) allow a global size
that is not a multiple of the work-group size: the last group in each dimension is
smaller. PoCL, and any OpenCL 1.2 driver, refuse such an enqueue, so gpurace runs it
as up to 2^d uniform sub-launches with a ``global_work_offset``: the full groups,
then per dimension with a remainder the region whose work-group size there is the
remainder. In a sub-launch get_global_id, get_local_id and get_local_size are right
natively; the built-ins that depend on the whole NDRange (get_group_id,
get_num_groups, get_global_size, get_enqueued_local_size, get_global_offset,
get_global_linear_id) are redefined by ``shaders/nonuniform.cl`` from the -D
constants of ``NdRange.defines``. This module is the one home of that split.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpurace import shaders
from gpurace.model import GpuraceError


def uniform_work_groups(options: Sequence[str]) -> bool:
    """Whether a program built with `options` needs uniform work-groups: OpenCL C
    before 2.0 does, and 2.0 or later with -cl-uniform-work-group-size (clang's
    "uniform-work-group-size" attribute, which Oclgrind reads)."""
    std = [o.split("=", 1)[1] for o in options if o.startswith("-cl-std=")]
    version = std[-1].upper().removeprefix("CL") if std else "1.2"
    try:
        major = float(version)
    except ValueError:
        return True
    return major < 2.0 or "-cl-uniform-work-group-size" in options


def check_uniform(
    global_size: Sequence[int],
    local_size: Sequence[int],
    options: Sequence[str],
    err: Callable[[str], GpuraceError],
    names: tuple[str, str, str] = ("global_size", "local_size", 'options = ["-cl-std=CL2.0"]'),
) -> None:
    """Raise err(...) when the work-group size does not divide the global size and
    the build options make the program need uniform work-groups (OpenCL 1.x), as
    Oclgrind refuses such a launch; OpenCL 2.0 programs run it non-uniform. `names`:
    what the file calls the global size, the local size and the way to OpenCL 2.0."""
    if not uniform_work_groups(options):
        return
    for d, (g, n) in enumerate(zip(global_size, local_size, strict=True)):
        if g % n:
            raise err(
                f"{names[0]} {list(global_size)} is not a multiple of {names[1]} "
                f"{list(local_size)} in dimension {'xyz'[d]}: OpenCL 1.x needs uniform "
                f"work-groups; build for OpenCL 2.0 ({names[2]}) to run the last group "
                "partial, or round the global size up and bounds-check the kernel"
            )


@dataclass(frozen=True)
class SubLaunch:
    """One uniform enqueue of a non-uniform NDRange."""

    offset: tuple[int, ...]
    global_size: tuple[int, ...]
    local_size: tuple[int, ...]


@dataclass(frozen=True)
class NdRange:
    """A global size and the enqueued (uniform) work-group size of one launch."""

    global_size: tuple[int, ...]
    local_size: tuple[int, ...]

    @classmethod
    def of(cls, global_size: Sequence[int], local_size: Sequence[int]) -> NdRange:
        return cls(tuple(int(g) for g in global_size), tuple(int(n) for n in local_size))

    @property
    def uniform(self) -> bool:
        return all(g % n == 0 for g, n in zip(self.global_size, self.local_size, strict=True))

    @property
    def groups(self) -> tuple[int, ...]:
        """Work-groups per dimension, the last one partial where a remainder is."""
        return tuple(-(-g // n) for g, n in zip(self.global_size, self.local_size, strict=True))

    def sub_launches(self) -> list[SubLaunch]:
        """The uniform enqueues that cover the NDRange (one when it is uniform), in
        the order of their offsets: per dimension, the full groups then the remainder."""
        pieces = []
        for g, n in zip(self.global_size, self.local_size, strict=True):
            full = g // n * n
            dim = [(0, full, n)] if full else []
            if g > full:
                dim.append((full, g - full, g - full))
            pieces.append(dim)
        return [
            SubLaunch(
                tuple(p[0] for p in combo), tuple(p[1] for p in combo), tuple(p[2] for p in combo)
            )
            for combo in itertools.product(*pieces)
        ]

    def defines(self) -> list[str]:
        """The build options that give ``shaders/nonuniform.cl`` the real NDRange."""
        sizes = [*self.global_size, 1, 1, 1][:3], [*self.local_size, 1, 1, 1][:3]
        return [
            f"-D_GR_NU_{w}{d}={s[d]}" for w, s in zip("GL", sizes, strict=True) for d in range(3)
        ]


def nonuniform_prelude() -> str:
    """The C text placed before a non-uniform launch's program (its runtime too)."""
    return shaders.text("nonuniform.cl") + "#line 1\n"


def program_for(
    source: str, options: Sequence[str], shape: NdRange | None
) -> tuple[str, list[str]]:
    """The program text and build options that run `shape`: unchanged when it is
    uniform (or None: the driver chooses the work-group size), else with the
    prelude and its -D constants (the instrumented launch and the replays alike)."""
    if shape is None or shape.uniform:
        return source, list(options)
    return nonuniform_prelude() + source, [*options, *shape.defines()]


def enqueue(
    cl: Any, queue: Any, kernel: Any, global_size: Sequence[int], shape: NdRange | None
) -> None:
    """Enqueue `kernel` over `shape` (its uniform sub-launches, one with no offset
    when it is uniform), or over `global_size` with the driver's choice of
    work-group size when `shape` is None. `cl` is pyopencl, imported by the caller."""
    if shape is None:
        cl.enqueue_nd_range_kernel(queue, kernel, tuple(global_size), None)
        return
    for part in shape.sub_launches():
        offset = part.offset if any(part.offset) else None
        cl.enqueue_nd_range_kernel(queue, kernel, part.global_size, part.local_size, offset)
