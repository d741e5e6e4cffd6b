"""``gpurace run``: check every compute launch of an unmodified program.

The pieces:

* ``session.Session`` holds the options (tool, --kernel, --launches, --repeat), the
  kernels seen, and runs the checks; it knows nothing about any GPU API.
* One hook module per GPU API (``hooks_wgpu``, ``hooks_opencl``, ``hooks_cupy``) wraps
  that API's methods, records kernels and launches, and hands the session a
  ``Launch`` (kernel source, entry point, grid and a host snapshot of every bound
  buffer as it was just before the launch) through ``Session.launch``. A hook
  module plugs in by providing ``install(session) -> Callable[[], None]`` (the
  uninstaller) and being named in ``HOOK_MODULES`` with the package it wraps: it is
  installed when the program imports that package (``on_import``).
* ``report`` prints the one report for the whole run and writes the JSON.
"""

from __future__ import annotations

#: Hook modules ``gpurace run`` installs, in order, each ``gpurace.run.<name>``, with
#: the top-level package it wraps: installed once the program imports that package
#: (at once when it is imported already; not at all when it is not installed).
HOOK_MODULES = {"hooks_wgpu": "wgpu", "hooks_opencl": "pyopencl", "hooks_cupy": "cupy"}
