"""What every language's `target` shares: the linear address order and the Target of a
backend with the shadow prefilter (docs/internals.md §0, §2, §5).

Kept apart from `gpurace.api` so that a language module can build its Target without
importing the pass loop that drives it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod
from typing import TYPE_CHECKING, Any

import numpy as np

from gpurace.abi import F_BYTE_MASK, F_KIND_MASK, F_VAR_SHIFT, W_FLAGS, W_OFFSET
from gpurace.interfaces import Backend, Results, Target
from gpurace.model import Event, GpuraceError, Instrumented, Kind, Space
from gpurace.options import Options

if TYPE_CHECKING:
    from gpurace.backends.common import LaunchResult
    from gpurace.backends.prefilter import Launch
    from gpurace.launch import LaunchSpec
    from gpurace.launch.spec import ArgSpec

FULL_RANGE = (0xFFFFFFFF // 16) * 16  # the whole u32 address order, 16-byte aligned

#: Per `LaunchSpec.language`: what its launch file describes, and what a kernel of it
#: needs (the error when a kernel is given another language's launch file).
_LAUNCH_FORMS = {
    "wgsl": ("a WGSL launch", "a WGSL kernel needs workgroups and [[binding]] tables"),
    "opencl": (
        "an OpenCL launch",
        "an OpenCL kernel needs global_size, local_size and [[arg]] tables",
    ),
}


def require_launch_of(launch: LaunchSpec, language: str) -> None:
    """A launch file read in another language's schema (a WGSL one for an OpenCL
    kernel) is one located error that says what this language's file needs."""
    if launch.language != language:
        described, needs = _LAUNCH_FORMS[launch.language][0], _LAUNCH_FORMS[language][1]
        raise GpuraceError(
            f"this launch file describes {described}; {needs} (docs/launch-files.md)",
            launch.path,
        )


def aliased_layout(
    extents: list[int], groups: int, aliased: dict[int, tuple[int, int]]
) -> tuple[list[int], int]:
    """`linear_layout` where each aliased variable (`aliased_params`) takes no addresses
    of its own: its base is its owner's plus its offset."""
    bases, total = linear_layout([0 if v in aliased else n for v, n in enumerate(extents)], groups)
    for v, (owner, offset) in aliased.items():
        bases[v] = bases[owner] + offset
    return bases, total


def linear_layout(extents: list[int], groups: int) -> tuple[list[int], int]:
    """Bases of variables of `extents` bytes in the linear address order, and its end.

    Reports pick the lowest (variable, byte) as the example and large launches are
    split by address; the device compares one u32, so variables are laid end to end
    in id order, 16-byte aligned, after one address per work-group (a group's
    barrier and exit events live at its linear id).
    """
    bases, total = [], (groups + 15) // 16 * 16
    for extent in extents:
        bases.append(total)
        total = (total + extent + 15) // 16 * 16
    return bases, total


def launcher(backend_launch: Callable[..., LaunchResult], *args: Any, **fixed: Any) -> Launch:
    """A language's `launch(lo, hi, capacity, bins=0, width=0, prefilter=None)` for
    `filtered_target`: the backend's instrumented launch with this launch's kernel,
    grid and arguments fixed (`args`, `fixed`) and each run's log range, log capacity,
    address histogram and prefilter passed on as every backend names them."""

    def launch(
        lo: int, hi: int, capacity: int, bins: int = 0, width: int = 0, prefilter: Any = None
    ) -> LaunchResult:
        return backend_launch(
            *args,
            log_capacity=capacity,
            log_range=(lo, hi),
            histogram_bins=bins,
            histogram_width=width,
            prefilter=prefilter,
            **fixed,
        )

    return launch


def realiasing(
    launch: Launch, backend: Backend, device: Any, aliased: dict[int, tuple[int, int]]
) -> Launch:
    """`launch`, with each logging run's records naming an aliased variable's accesses
    as its owner's bytes (`realias`: the analysis pairs by variable and word) where
    `aliased` has any; a counting run (`bins`) logs nothing to rename."""
    if not aliased:
        return launch

    def run(
        lo: int, hi: int, capacity: int, bins: int = 0, width: int = 0, prefilter: Any = None
    ) -> LaunchResult:
        result = launch(lo, hi, capacity, bins, width, prefilter)
        if not bins:
            result.log = backend.upload_log(
                device, realias(backend.read_log(device, result), aliased)
            )
        return result

    return run


def filtered_target(
    backend: Backend,
    device: Any,
    dev_name: str,
    inst: Instrumented,
    name: str,
    workgroup_size: tuple[int, int, int],
    groups: tuple[int, int, int],
    bases: list[int],
    total: int,
    local_words: int,
    launch: Launch,
    options: Options,
    results: Results | None = None,
    shared_local: bool = False,
) -> Target:
    """The Target of one launch on `backend`: runs go through `prefilter.filtered_run`
    on top of the language's `launch(lo, hi, capacity, bins, width, prefilter=None)`,
    with a shadow prefilter of `local_words` words per group for local memory unless
    `options.prefilter` is off; analyses go through `backend.analyse_on_device` and
    then `results` (the language's result policy, `Language.results`; none: the
    analysis as it is). `options`: a resolved `uniform_writes` ("race" or
    "tolerate"), `prefilter` and `profile`. `shared_local` (WGSL: the entry point's
    workgroup-memory accesses are group-invariant): a local area for group 0 alone,
    which stands for every group (docs/internals.md §2)."""
    from gpurace.backends.prefilter import filtered_run

    pre = None
    if options.prefilter:
        wgsize, n_groups = prod(workgroup_size), prod(groups)
        pre = backend.prefilter(device, total, wgsize, local_words, 1 if shared_local else n_groups)
        pre.shared = shared_local and pre.groups > 0
    barriers = any(s.event == Event.BARRIER for s in inst.sites)
    run = filtered_run(
        launch,
        pre,
        barriers,
        lambda p: backend.shadow_may_conflict(device, p),
        FULL_RANGE,
        events_end=prod(groups),
        profile=options.profile,
    )
    return Target(
        inst,
        name,
        dev_name,
        workgroup_size,
        groups,
        bases,
        total,
        backend.max_records_per_pass(device),
        backend.max_shadow_words(device),
        run,
        backend,
        device,
        options,
        results,
        pre.nbytes if pre else 0,
    )


def kernel_shadows(
    inst: Instrumented,
    kernel: str,
    args: Sequence[ArgSpec],
    path: str,
    extents: list[int],
    groups: int,
) -> tuple[list[int], list[int]]:
    """(bytes, bitmaps) of each tracked variable's written-shadow (`abi.place_written`;
    docs/memcheck.md) for OpenCL and CUDA: a ``__local``/``__shared__`` variable or
    parameter of `kernel` has one per work-group, a buffer the launch declares
    uninitialised (``fill = "uninit"``, a .sim file's ``noinit``) one, the others none.
    An uninitialised buffer the kernel does not access through a tracked pointer
    parameter is an error at its table, never a buffer silently left unchecked."""
    uninit = {a.index: a for a in args if a.buffer is not None and a.buffer.uninit}
    instances = [
        0 if v.kernel != kernel else groups if v.space == Space.LOCAL else int(v.binding in uninit)
        for v in inst.variables
    ]
    tracked = {v.binding for v in inst.variables if v.kernel == kernel}
    for index, arg in uninit.items():
        if index not in tracked:
            raise GpuraceError(
                f'argument {index}: fill = "uninit" is checked only for a buffer the kernel '
                "accesses through its pointer parameter; give it a fill",
                path,
                arg.line,
            )
    return extents, instances


def initial_contents(
    inst: Instrumented, kernel: str, args: Sequence[ArgSpec]
) -> Callable[[int, int, int], int | None]:
    """The initial bits of a location (var, offset, size: at most 4 bytes read) of the
    launch's buffers, for release/acquire (docs/ordering.md): a read of a value that
    only the initial contents could have given acquires nothing. None where they are
    not known (a buffer declared uninitialised, shared or module variables).

    Only a kernel with release/acquire asks (`Target.analyse`'s ordering): for the
    others no buffer is copied (`gpurace run`'s 1M-element buffers: ~5 ms each)."""
    if not inst.ordering:
        return lambda var, offset, size: None
    data = {
        a.index: a.buffer.data.tobytes()
        for a in args
        if a.buffer is not None and not a.buffer.uninit
    }
    by_var = {
        v.id: data[v.binding]
        for v in inst.variables
        if v.kernel == kernel and v.space == Space.GLOBAL and v.binding in data
    }

    def initial(var: int, offset: int, size: int) -> int | None:
        raw = by_var.get(var)
        n = min(size, 4)
        if raw is None or offset + n > len(raw):
            return None
        return int.from_bytes(raw[offset : offset + n], "little")

    return initial


def aliased_params(inst: Instrumented, kernel: str, launch: Any) -> dict[int, tuple[int, int]]:
    """The tracked variable of each aliased argument (``alias = N``; `gpurace run`: one
    ``cl.Buffer`` or cupy array, or overlapping sub-buffers or views of one, passed for
    two parameters) -> the variable of argument N and the byte offset there, for OpenCL
    and CUDA. Their kernels attribute an access by address to the first tracked
    parameter whose range holds it, which may be either; `realias` then names every
    access as the owner's bytes, as for WGSL's aliases.

    A buffer declared uninitialised that is aliased is an error at its table, as on
    WGSL: one written-shadow per parameter would not see writes through the other."""
    var_of = {
        v.binding: v.id
        for v in inst.variables
        if v.kernel == kernel and v.space == Space.GLOBAL and v.binding is not None
    }
    out: dict[int, tuple[int, int]] = {}
    for arg in launch.args:
        buf = arg.buffer
        if buf is None or buf.alias is None:
            continue
        owner = launch.args[buf.alias[1]]
        for a in (arg, owner):
            if a.buffer is not None and a.buffer.uninit:
                raise GpuraceError(
                    f'argument {a.index}: fill = "uninit" is checked only for a buffer no '
                    "other argument aliases; give it a fill",
                    launch.path,
                    a.line,
                )
        if arg.index in var_of and owner.index in var_of:
            out[var_of[arg.index]] = (var_of[owner.index], buf.offset)
    return out


def argument_views(launch: Any) -> dict[int, tuple[int, int]]:
    """Each aliased argument's index -> (the index of the argument whose buffer it is
    passed, byte offset): what a backend's ``launch(aliases=...)`` takes."""
    return {
        a.index: (a.buffer.alias[1], a.buffer.offset)
        for a in launch.args
        if a.buffer is not None and a.buffer.alias is not None
    }


def realias(records: np.ndarray, aliased: dict[int, tuple[int, int]]) -> np.ndarray:
    """Log records (n, 8) with each access through an aliased binding rewritten as the
    same bytes of the buffer it views (that variable, offset + the alias's offset):
    the analysis pairs accesses by (variable, word), so both bindings' accesses must
    name one variable to meet (design.md: a race is on memory, not on names). WGSL's
    aliased bindings and OpenCL's and CUDA's aliased arguments (one home for all)."""
    out = records.copy()
    flags = records[:, W_FLAGS]
    var = (flags >> F_VAR_SHIFT) & F_BYTE_MASK
    access = (flags & F_KIND_MASK) != int(Kind.EVENT)
    keep = np.uint32(~(F_BYTE_MASK << F_VAR_SHIFT) & 0xFFFFFFFF)  # all but the var field
    for v, (owner, offset) in aliased.items():
        hit = access & (var == v)
        out[hit, W_FLAGS] = (flags[hit] & keep) | np.uint32(owner << F_VAR_SHIFT)
        out[hit, W_OFFSET] += np.uint32(offset)
    return out
