"""NVRTC compiles are kept for the process (`compile.compile_cuda`): the same source
is compiled once, and a change to a file it #includes from the kernel's directory is
compiled again (the key holds the included text)."""

from __future__ import annotations

from pathlib import Path

from gpurace.instrument.ptx.compile import compile_cuda

KERNEL = '#include "scale.cuh"\nextern "C" __global__ void k(int *o) { o[0] = SCALE; }\n'


def test_a_source_is_compiled_once_and_again_when_its_include_changes(tmp_path: Path):
    (tmp_path / "scale.cuh").write_text("#define SCALE 12345\n")
    path = str(tmp_path / "k.cu")
    first = compile_cuda(KERNEL, path)
    assert "12345" in first.ptx
    assert compile_cuda(KERNEL, path) is first  # kept
    assert compile_cuda(KERNEL, path, ("-DX=1",)) is not first  # other options
    (tmp_path / "scale.cuh").write_text("#define SCALE 67890\n")
    again = compile_cuda(KERNEL, path)
    assert "67890" in again.ptx and "12345" not in again.ptx
