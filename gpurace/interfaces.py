"""The two extension points: a kernel `Language` and a device `Backend` (docs/internals.md §0).

A language (WGSL, OpenCL C, CUDA) is one module under `gpurace.languages`; a backend
(wgpu, OpenCL, CUDA) is one module under `gpurace.backends`. Both are duck-typed
modules that satisfy these protocols (mypy checks modules against protocols), picked
by `gpurace.registry`; `gpurace.api.check`, the CLI and ``gpurace run`` only ever talk
to them through these names, so adding a language or a device API is adding modules.

A `Target` is one launch made ready on one backend: what the language-neutral pass
loop of `gpurace.api.check` drives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import prod
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    import numpy as np

    from gpurace.backends.analysis_driver import DeviceAnalysis
    from gpurace.backends.common import LaunchResult
    from gpurace.backends.prefilter import Prefilter
    from gpurace.model import Instrumented
    from gpurace.options import Options


# A language's launch description: `gpurace.launch.LaunchSpec` (WGSL, OpenCL C) or
# `gpurace.launch.cuda.CudaLaunch` (CUDA).
L = TypeVar("L")


class DeviceInfo(Protocol):
    """One entry of `Backend.list_devices` (what ``gpurace devices`` prints)."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...


class Backend(Protocol):
    """One device API (a module of `gpurace.backends`). Device handles are opaque
    (`object`): a wgpu device, an OpenCL command queue, a cupy Device."""

    def list_devices(self) -> Sequence[DeviceInfo]:
        """Every usable device of this API, the default (best) first; [] when the API
        or its driver is missing."""
        ...

    def get_device(self, name: str | None = None) -> tuple[Any, str]:
        """(device handle, description) of the first device whose description contains
        `name` (any case), or the API's default (GPUs first) for None; one handle per
        device and process. `gpurace.registry.open_device` resolves the user's name."""
        ...

    # The instrumented launch: `launch(device, source, path, kernel, <the language's
    # grid and arguments>, *, var_bases, log_capacity, log_range, histogram_bins,
    # histogram_width, prefilter, ...) -> LaunchResult`. Its positional middle is the
    # one thing a language and its backend agree on privately, so it is a plain
    # callable here; the Language's `target` is its only caller in a check. (A
    # read-only member, so that a backend's launch may return a LaunchResult subclass.)
    @property
    def launch(self) -> Callable[..., LaunchResult]: ...

    def prefilter(
        self, device: Any, address_end: int, wgsize: int, local_words: int = 0, num_groups: int = 0
    ) -> Prefilter:
        """A cleared shadow for the prefilter's runs (docs/internals.md §2): launch-wide
        words up to `address_end`, plus per-group local areas where they fit."""
        ...

    def shadow_may_conflict(self, device: Any, pre: Prefilter) -> bool:
        """After the build run: whether any shadow word shows a possible conflict
        (none: one run was enough, nothing needs logging)."""
        ...

    def max_records_per_pass(self, device: Any) -> int:
        """Log records one instrumented launch's log buffer can hold."""
        ...

    def max_shadow_words(self, device: Any) -> int:
        """Words of the linear address order one analysis pass covers."""
        ...

    def analysis_limit(self, device: Any) -> int:
        """Bytes of the largest buffer the analysis kernels may bind."""
        ...

    def analyse_on_device(
        self,
        device: Any,
        log_buf: Any,
        n_records: int,
        var_bases: list[int],
        uniform_writes_race: bool,
        **options: Any,
    ) -> DeviceAnalysis:
        """Run the analysis kernels (`shaders/analysis.*`) on the first `n_records` of a
        launch's log where it lies; keyword options: `analysis_driver.analyse`."""
        ...

    def upload_log(self, device: Any, records: np.ndarray) -> Any:
        """A host-side log as the device buffer `analyse_on_device` reads (tests)."""
        ...

    def read_log(self, device: Any, result: LaunchResult) -> np.ndarray:
        """A launch's log records read back to the host (tests, debugging)."""
        ...

    def replayer(self) -> Callable[..., Any]:
        """The determinism replayer of this API, ``repeat(source, spec, **options:
        determinism.ReplayOptions) -> RepeatResult``, looked up on the
        `gpurace.determinism` package when asked; `determinism.repeater` (``gpurace
        repeat``, ``gpurace run --tool determinism``) is the one caller."""
        ...


class RunFn(Protocol):
    """A Target's `run`: one instrumented launch logging the addresses [lo, hi) into a
    log of `capacity` records, or (`bins` > 0) counting records per address bin of
    `width` bytes (`LaunchResult.histogram`)."""

    def __call__(
        self, lo: int, hi: int, capacity: int, bins: int = 0, width: int = 0
    ) -> LaunchResult: ...


#: A Language's result policy on one pass's analysis (`Language.results`).
Results = Callable[["DeviceAnalysis"], "DeviceAnalysis"]


@dataclass
class Target:
    """One launch made ready on one backend: what the language-neutral pass loop needs
    (`gpurace.target.filtered_target` makes it for every language)."""

    inst: Instrumented
    kernel: str
    device: str
    workgroup_size: tuple[int, int, int]
    num_groups: tuple[int, int, int]
    bases: list[int]
    total: int  # end of the linear address order
    max_records: int  # records one log buffer holds
    max_words: int  # words one analysis pass's shadow covers
    run: RunFn
    backend: Backend  # where `analyse` runs the analysis kernels
    handle: Any  # the device `backend` opened for this launch
    options: Options  # a resolved `uniform_writes` ("race" or "tolerate"), `profile`
    results: Results | None = None  # the language's result policy (none: as it is)
    held_bytes: int = 0  # device memory held for the whole check (the prefilter's shadow)
    work_items: int = 0  # 0: num_groups x workgroup_size (fewer with a partial group)
    # a location's initial contents (var, offset, size) -> bits, for release/acquire
    # (docs/ordering.md); None: no buffer's contents are known
    initial: Callable[[int, int, int], int | None] | None = None

    def analyse(
        self,
        result: LaunchResult,
        n: int,
        lo: int,
        hi: int,
        *,
        list_instances: int = 0,
        splittable: bool = False,
        split_order: bool = False,
    ) -> DeviceAnalysis:
        """The analysis of the first `n` records of `result`'s log for the address
        range [lo, hi) through the backend's `analyse_on_device` (this launch's layout
        and grid), then the language's result policy; `list_instances` caps the
        instances listed, `splittable` says whether too-big tables may be answered
        with `too_big`. A log with release/acquire ORDER events is ordered on the device
        by its clock table, else on the host (docs/ordering.md, "Where it is decided"),
        where it holds what the clocks need: the whole launch's, or a pass's whose run
        logged every ORDER event and write candidate (`split_order`,
        gpurace/analysis/split_order.py)."""
        whole = lo == 0 and hi >= self.total
        ordered = self.inst.ordering and (whole or split_order)
        more: dict[str, Any] = {}
        if ordered:
            from gpurace.backends.analysis_driver import Ordering

            more["ordering"] = Ordering(self.initial, self.local_clocks, self.phases)
        if result.events_only and not ordered:
            from gpurace.analysis import events_only

            small = n <= events_only.HOST_RECORDS_MAX  # else the kernels, on the device
            log = self.backend.read_log(self.handle, result)[:n] if small else None
            if log is not None and events_only.diverges(log, lo, hi) is False:
                from gpurace.backends.analysis_driver import DeviceAnalysis

                found = DeviceAnalysis([], [], 0, 0, {}, [])  # nothing to report
                return self.results(found) if self.results else found
        found = self.backend.analyse_on_device(
            self.handle,
            result.log,
            n,
            self.bases,
            self.options.uniform_writes == "race",
            address_range=(lo, hi),
            address_end=self.total,
            wgsize=prod(self.workgroup_size),
            groups=prod(self.num_groups),
            list_instances=list_instances,
            splittable=splittable,
            profile=self.options.profile,
            **more,
        )
        if found.clocks is not None:
            found = self._explain(found)
        elif ordered and not found.too_big:
            found = self._ordered(found, result, n, None if whole else (lo, hi), list_instances > 0)
        return self.results(found) if self.results else found

    @property
    def local_clocks(self) -> bool:
        """Whether local accesses take release/acquire clocks: CUDA's carry the block
        barrier count; OpenCL's have epochs of their own, which only barriers order."""
        return self.inst.language == "cuda"

    @property
    def phases(self) -> bool:
        """Whether the log's mbarrier events carry their phases, so that mbarriers order
        accesses: on every device, from the instrumented kernel's own shadow of each
        barrier (gpurace/instrument/ptx/mbshadow.py; the state tokens are opaque on a
        GPU)."""
        return True

    def where(self, site: int) -> str:
        """A site id's "line:col" (the explanations of release/acquire races)."""
        return f"{self.inst.sites[site].line}:{self.inst.sites[site].col}"

    def _explain(self, found: DeviceAnalysis) -> DeviceAnalysis:
        """Each race the device's clock table left names the synchronisation that fails
        to order it (`explanations.why`, on the records the table was computed from), and
        what the mbarrier ordering left out joins what saturated."""
        from dataclasses import replace

        from gpurace.analysis import explanations, mbarriers

        table = found.clocks
        assert table is not None
        spaces = {v.id: v.space for v in self.inst.variables}
        log = explanations.explain(
            found.races, table.log, table.order, self.initial, self.where, self.local_clocks,
            spaces, table.sides,
        )  # fmt: skip
        notes = mbarriers.notes(log.ops, self.phases)
        return replace(found, saturated=found.saturated + notes) if notes else found

    def _ordered(
        self,
        found: DeviceAnalysis,
        result: LaunchResult,
        n: int,
        part: tuple[int, int] | None,
        listing: bool,
    ) -> DeviceAnalysis:
        """A log with release/acquire ORDER events decided on the host by the reference,
        where the device could not take its clock table (`found.host_reason`;
        docs/ordering.md, "Where it is decided"): its races replace the device's, which
        ordered by barriers only. `part`: a pass's address range, whose pairs alone are
        decided (the clocks take the whole log)."""
        from dataclasses import replace

        from gpurace.analysis import happens, split_order
        from gpurace.model import Race, RaceClass

        records = self.backend.read_log(self.handle, result)[:n]
        spaces = {v.id: v.space for v in self.inst.variables}
        uwr = self.options.uniform_writes == "race"
        pairs = None if part is None else split_order.outside_blanked(records, self.bases, *part)
        host_listed: list[tuple[tuple, Race]] | None = [] if listing else None
        decided = happens.decide(
            records, spaces, uwr, self.initial, self.where, self.local_clocks, self.phases,
            pairs, host_listed,
        )  # fmt: skip
        if decided is None:
            return found
        races, saturated = decided
        orders = {r.key: (r.var, r.address, 0) for r in races}
        # --all: the host's instances (the device's ordered by barriers only: it misses
        # a thread's own pairs with its copies in flight, and lists pairs the clocks
        # order); a divergence's are the device's (ordering does not touch them)
        divergent = {r.key for r in races if r.cls == RaceClass.DIVERGENCE}
        listed = (host_listed or []) + [x for x in found.listed if x[0][0] in divergent]
        return replace(
            found, races=races, orders=orders, saturated=found.saturated + saturated,
            listed=listed, ordering="host",
        )  # fmt: skip


class Language(Protocol[L]):
    """One kernel language (a module of `gpurace.languages`); `L` is its launch type."""

    @property
    def name(self) -> str:
        """The language's name in reports and launch specs ("wgsl", "opencl", "cuda")."""
        ...

    @property
    def extensions(self) -> tuple[str, ...]:
        """Kernel file extensions, lower case with the dot (".wgsl")."""
        ...

    @property
    def default_backend(self) -> str:
        """The name of the backend that runs it by default (`gpurace.registry.backend`)."""
        ...

    def read_launch(self, path: str) -> L:
        """Read and check a launch file in this language's schema (docs/launch-files.md)."""
        ...

    def instrument(self, source: str, path: str, options: Sequence[str] = ()) -> Instrumented:
        """Rewrite `source` for logging (`options`: the launch's build options)."""
        ...

    def target(
        self,
        source: str,
        launch: L,
        path: str,
        backend: Backend,
        entry: str | None,
        options: Options,
    ) -> Target:
        """Instrument, validate `launch` against the kernel, open the device
        (`registry.open_device`), lay out the addresses and make the launch's Target
        on `backend`."""
        ...

    def results(self, analysis: DeviceAnalysis) -> DeviceAnalysis:
        """This language's policy on one pass's analysis (e.g. races CUDA's memory model
        does not count); most languages return it as it is."""
        ...

    def no_source_reason(self, variant: str) -> str:
        """Why ``gpurace run`` cannot check a launch of this language whose kernel has
        no source text (`variant`: the pipeline variant, WGSL's override constants)."""
        ...
