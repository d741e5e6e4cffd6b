"""Every knob of a check in one typed object, and the one place the environment is read.

The ``GPURACE_*`` environment variables are read once, at the edge (the CLI, ``gpurace
run``, or `gpurace.api.check` when its caller passes no options), by `Options.from_env`;
everything below takes the `Options` it is handed, so that a test or a program sets a
knob by passing a value rather than by patching a module global.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from gpurace.model import TOOLS, GpuraceError

#: Backend name -> the environment variable that names its default device.
DEVICE_VARIABLES = MappingProxyType(
    {"wgpu": "GPURACE_DEVICE", "opencl": "GPURACE_OPENCL_DEVICE", "cuda": "GPURACE_CUDA_DEVICE"}
)
KERNEL_TIMEOUT_S = 60.0  # a launch that runs longer is taken for a hang (watchdog.py)
RECORDS_PER_ITEM = 16  # first log size tried, per work-item (docs/internals.md §2)


def parse_tools(text: str, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``--tool``'s value: one class, ``all`` or a comma list (``race,memcheck``), as
    the selected classes in TOOLS order (then `extra`'s: `gpurace run`'s determinism);
    an unknown name is one GpuraceError that lists the valid ones."""
    known = TOOLS + extra
    names = [n.strip() for n in text.split(",") if n.strip()]
    chosen: set[str] = set()
    for n in names:
        if n == "all":
            chosen.update(TOOLS)
        elif n in known:
            chosen.add(n)
        else:
            raise GpuraceError(
                f"--tool: unknown tool '{n}'; use {', '.join(known)}, all or a comma list"
            )
    if not chosen:
        raise GpuraceError(f"--tool: name one of {', '.join(known)} or all")
    return tuple(n for n in known if n in chosen)


@dataclass(frozen=True)
class Options:
    """How one check runs. Defaults are gpurace's; `from_env` adds the environment's.

    `uniform_writes` None means the launch file's choice, else "tolerate". `device`
    is the user's --device (a substring of a device's description, for whichever
    backend the kernel's language runs on); `default_devices` the per-backend
    defaults ($GPURACE_DEVICE, $GPURACE_OPENCL_DEVICE, $GPURACE_CUDA_DEVICE) used when
    `device` is None. `backend` forces a backend by name (default: the language's).
    """

    uniform_writes: str | None = None
    # log only words where a conflict is possible, and leave read-only buffers' loads
    # untracked (internals §2 and §5, "Read-only elision"); False logs every access
    prefilter: bool = True
    records_per_item: int = RECORDS_PER_ITEM
    kernel_timeout_s: float = KERNEL_TIMEOUT_S  # $GPURACE_KERNEL_TIMEOUT
    device: str | None = None
    default_devices: Mapping[str, str] = field(default_factory=dict)
    backend: str | None = None
    profile: bool = False  # $GPURACE_PROFILE: print each run's, search's and pass's time
    debug: bool = False  # $GPURACE_DEBUG: show tracebacks of internal errors
    schedules: int = 1  # --schedules: warp orders to run on sim (gpurace/schedules.py)
    schedule_seed: int = 0  # --schedule-seed: the first order's seed (0: min-PC order)
    # the check classes reported and deciding the exit status (--tool; docs/memcheck.md)
    tools: tuple[str, ...] = TOOLS

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **given: object) -> Options:
        """Options from the environment (`os.environ` unless given), then `given`'s
        keyword values on top (None values are left out: "not given")."""
        env = os.environ if environ is None else environ
        timeout = env.get("GPURACE_KERNEL_TIMEOUT")
        try:
            seconds = float(timeout) if timeout else KERNEL_TIMEOUT_S
        except ValueError:
            seconds = math.nan
        if not (math.isfinite(seconds) and seconds > 0):  # the watchdog's limit: watchdog.py
            raise GpuraceError(
                f"GPURACE_KERNEL_TIMEOUT must be a number of seconds, not '{timeout}' "
                "(more than 0; default 60)"
            )
        found = cls(
            kernel_timeout_s=seconds,
            default_devices={b: env[v] for b, v in DEVICE_VARIABLES.items() if env.get(v)},
            profile=bool(env.get("GPURACE_PROFILE")),
            debug=debug_enabled(env),
        )
        return found.with_(**given)

    def with_(self, **given: object) -> Options:
        """A copy with the given (not None) fields replaced."""
        return replace(self, **{k: v for k, v in given.items() if v is not None})  # type: ignore[arg-type]

    def device_for(self, backend: str) -> str | None:
        """The device name to open on `backend`: --device, else that backend's default
        from the environment, else None (the backend's own default: GPUs first)."""
        return self.device or self.default_devices.get(backend) or None


def debug_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """$GPURACE_DEBUG: whether an internal error shows its traceback (read by the CLI's
    and ``gpurace run``'s last line of defence, which must not fail itself)."""
    return bool((os.environ if environ is None else environ).get("GPURACE_DEBUG"))
