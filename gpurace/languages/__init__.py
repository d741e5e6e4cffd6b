"""Kernel languages, one module each (`gpurace.interfaces.Language`): ``wgsl``,
``opencl``, ``cuda``. `gpurace.registry` picks one by file extension."""
