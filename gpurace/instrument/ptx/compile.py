"""CUDA C++ to PTX with NVRTC (no GPU needed), and PTX to SASS with ptxas.

NVRTC comes from NVIDIA's pip wheels (``nvidia-cuda-nvrtc`` + ``cuda-bindings``, the
``cuda`` extra), so a CPU-only CI machine compiles and checks kernels exactly as the
GPU machine would. ``ptxas`` (``nvidia-cuda-nvcc``) assembles the instrumented PTX on
the CPU, which proves it is valid for a target without running it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpurace.model import GpuraceError

DEFAULT_ARCH = "compute_90"
_LOG_LINE = re.compile(r"^(?P<file>.*?)\((?P<line>\d+)\): (?:catastrophic )?error: (?P<what>.*)$")


@dataclass(frozen=True)
class CompiledPtx:
    """NVRTC's output: the PTX and the lowered (mangled) name of each name expression."""

    ptx: str
    lowered: dict[str, str]
    log: str


def _site_dirs() -> list[Path]:
    import site

    dirs = [Path(p) for p in site.getsitepackages()]
    user = site.getusersitepackages()
    return [*dirs, Path(user)] + [Path(p) for p in sys.path if p.endswith("site-packages")]


def cuda_include_dirs() -> list[str]:
    """The CUDA headers shipped in the pip wheels (cuda_fp16.h, cooperative_groups.h),
    which NVRTC does not find by itself; then a system toolkit's, if any."""
    found: list[str] = []
    for d in _site_dirs():
        for sub in (
            "nvidia/cu13/include",
            "nvidia/cuda_runtime/include",
            "nvidia/cuda_nvrtc/include",
        ):
            if (d / sub / "cuda_fp16.h").exists() and str(d / sub) not in found:
                found.append(str(d / sub))
            # libcu++ (cuda/std/...), which cooperative_groups.h includes
            if (d / sub / "cccl" / "cuda").is_dir() and str(d / sub / "cccl") not in found:
                found.append(str(d / sub / "cccl"))
    home = Path(os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda")
    if (home / "include" / "cuda_fp16.h").exists():
        found.append(str(home / "include"))
        # CUDA 13 toolkits keep libcu++ in include/cccl (the pip wheel may be missing)
        if (home / "include" / "cccl" / "cuda").is_dir():
            found.append(str(home / "include" / "cccl"))
    return found


def find_ptxas() -> str | None:
    """The ptxas to assemble with: $GPURACE_PTXAS, the pip wheel's (nvidia-cuda-nvcc
    puts it in site-packages/nvidia/cu13/bin), a toolkit's, else the PATH's."""
    env = os.environ.get("GPURACE_PTXAS")
    if env:
        return env
    for d in _site_dirs():
        for sub in ("nvidia/cu13/bin/ptxas", "nvidia/cuda_nvcc/bin/ptxas"):
            if (d / sub).is_file():
                return str(d / sub)
    home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    if (Path(home) / "bin" / "ptxas").is_file():
        return str(Path(home) / "bin" / "ptxas")
    return shutil.which("ptxas")


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        raise GpuraceError(
            "CUDA support is not installed: pip install 'gpurace[cuda]' "
            "(NVIDIA's NVRTC and cuda-bindings)"
        ) from None
    return nvrtc


def _check(result: tuple, what: str) -> tuple:
    err = result[0]
    if int(err) != 0:
        raise GpuraceError(f"NVRTC {what} failed: {err!r}")
    return result[1:]


# compiles of this process, newest last: (key) -> output (`compile_cuda`)
_COMPILED: dict[tuple, CompiledPtx] = {}
_COMPILED_KEEP = 64
_INCLUDED = re.compile(r"""^\s*#\s*include\s*[<"]([^>"\n]+)[>"]""", re.M)


def compile_cuda(
    source: str,
    path: str,
    options: Sequence[str] = (),
    name_expressions: Sequence[str] = (),
    arch: str = DEFAULT_ARCH,
) -> CompiledPtx:
    """Compile CUDA C++ to PTX with line info (``-lineinfo``) for `arch`.

    `options` are the user's NVRTC options (``-DN=4``, ``-std=c++17``, ``-I...``);
    `name_expressions` (``"saxpy<float>"``) instantiate templates and come back
    lowered. A compile error is a GpuraceError at the first error's file:line, with
    NVRTC's log (the user's own lines) in the message.

    A process keeps its last compiles (NVRTC takes 0.1-2 s a kernel, over 2 s with
    cooperative_groups' headers; `gpurace run` and a test suite compile one source
    many times): keyed by everything the compile reads that can change while the
    process runs, the source, path, options, arch and the text of each file its
    #include lines name in the kernel's directory or an -I directory (the toolkit's
    headers are the installed toolkit's for the process's life).
    """
    key = _compile_key(source, path, options, name_expressions, arch)
    if key is not None and key in _COMPILED:
        _COMPILED[key] = _COMPILED.pop(key)  # newest last
        return _COMPILED[key]
    out = _compile(source, path, options, name_expressions, arch)
    if key is not None:
        _COMPILED[key] = out
        while len(_COMPILED) > _COMPILED_KEEP:
            del _COMPILED[next(iter(_COMPILED))]
    return out


def _compile_key(
    source: str, path: str, options: Sequence[str], names: Sequence[str], arch: str
) -> tuple | None:
    """The memo key of a compile: None (not kept) when an included file is not
    readable or there are more than 64 of them."""
    here = os.path.dirname(os.path.abspath(path))
    dirs = [here, *(o[2:] for o in options if o.startswith("-I") and len(o) > 2)]
    texts: dict[str, str] = {}
    todo = [source]
    while todo:
        for name in _INCLUDED.findall(todo.pop()):
            for f in (os.path.join(d, name) for d in dirs):
                if f in texts or not os.path.isfile(f):
                    continue
                try:
                    texts[f] = Path(f).read_text(errors="replace")
                except OSError:
                    return None
                if len(texts) > 64:
                    return None
                todo.append(texts[f])
    return (source, path, tuple(options), tuple(names), arch, tuple(sorted(texts.items())))


def _compile(
    source: str, path: str, options: Sequence[str], name_expressions: Sequence[str], arch: str
) -> CompiledPtx:
    nvrtc = _nvrtc()
    (prog,) = _check(nvrtc.nvrtcCreateProgram(source.encode(), path.encode(), 0, [], []), "create")
    try:
        for expr in name_expressions:
            _check(nvrtc.nvrtcAddNameExpression(prog, expr.encode()), f"name expression {expr!r}")
        opts = ["-lineinfo", f"--gpu-architecture={arch}", *options]
        here = os.path.dirname(os.path.abspath(path))
        opts += [f"-I{here}"] + [f"-I{d}" for d in cuda_include_dirs()]
        res = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        (size,) = _check(nvrtc.nvrtcGetProgramLogSize(prog), "log")
        buf = bytearray(size)  # not b" " * size: for 1 byte that is the interned b" "
        nvrtc.nvrtcGetProgramLog(prog, buf)
        log = buf.rstrip(b"\0").decode(errors="replace").strip()
        if int(res[0]) != 0:
            raise _compile_error(log, path)
        (size,) = _check(nvrtc.nvrtcGetPTXSize(prog), "PTX size")
        buf = bytearray(size)  # not b" " * size: for 1 byte that is the interned b" "
        nvrtc.nvrtcGetPTX(prog, buf)
        ptx = buf.rstrip(b"\0").decode()
        lowered = {}
        for expr in name_expressions:
            (name,) = _check(nvrtc.nvrtcGetLoweredName(prog, expr.encode()), "lowered name")
            lowered[expr] = name.decode() if isinstance(name, bytes) else str(name)
        return CompiledPtx(ptx, lowered, log)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _compile_error(log: str, path: str) -> GpuraceError:
    """NVRTC's log as one located error: the first error's file:line, the log after."""
    lines = [ln for ln in log.splitlines() if ln.strip()]
    for ln in lines:
        m = _LOG_LINE.match(ln.strip())
        if m:
            rest = " | ".join(x.strip() for x in lines if x.strip() != ln.strip())
            msg = f"{m.group('what')} (NVRTC{': ' + rest if rest else ''})"
            return GpuraceError(msg, m.group("file"), int(m.group("line")))
    return GpuraceError(f"NVRTC could not compile the kernel: {' | '.join(lines)}", path)


def assemble(ptx: str, arch: str = "sm_90", ptxas: str | None = None) -> bytes:
    """Assemble PTX for `arch` with ptxas; return the cubin. Errors carry ptxas' log."""
    exe = ptxas or find_ptxas()
    if not exe:
        raise GpuraceError("ptxas not found: pip install nvidia-cuda-nvcc or set GPURACE_PTXAS")
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        Path(src).write_text(ptx)
        proc = subprocess.run(
            [exe, f"-arch={arch}", src, "-o", out], capture_output=True, text=True, check=False
        )
        if proc.returncode:
            raise GpuraceError(f"ptxas ({arch}) rejected the PTX: {proc.stderr.strip()}")
        return Path(out).read_bytes()
