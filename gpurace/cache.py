"""gpurace's on-disk cache: what a check computes from a kernel's text alone, kept
across processes so that a warm `gpurace check` does not redo it.

A small check is dominated by fixed work, not by the launch: parsing the kernel
with libclang (which reads all of `opencl-c.h`) and building programs, which PoCL
redoes in part on every process even when its own kernel cache hits (it
preprocesses and hashes the source each time). So entries are keyed by everything
their value depends on (the text, the options, the device, and a stamp of gpurace's
own code that produces them), written whole or not at all, and a damaged or
unreadable entry is a miss, never an error.

The directory is ``$GPURACE_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpurace``, else
``~/.cache/gpurace``; ``GPURACE_NO_CACHE=1`` turns the cache off (nothing read or
written).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import tempfile
from pathlib import Path


def directory() -> Path | None:
    """The cache directory (created on first write), or None when it is turned off."""
    if os.environ.get("GPURACE_NO_CACHE", "") not in ("", "0"):
        return None
    given = os.environ.get("GPURACE_CACHE_DIR")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpurace"


def key(kind: str, *parts: str | bytes) -> str:
    """A file name for an entry of `kind` (a subdirectory) from the parts it depends on."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return f"{kind}/{h.hexdigest()}"


def load(name: str) -> bytes | None:
    """The entry `name` (from `key`), or None: absent, unreadable or cache off."""
    where = directory()
    if where is None:
        return None
    try:
        return (where / name).read_bytes()
    except OSError:
        return None


def store(name: str, data: bytes) -> None:
    """Write the entry `name` atomically (a reader sees all of it or none); a cache
    that cannot be written is silently not written (a read-only home)."""
    where = directory()
    if where is None:
        return
    path = where / name
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass


@functools.cache
def code_stamp(*modules: str) -> str:
    """A digest of the files of gpurace's own `modules` (a package stands for every
    file under it, ``gpurace.shaders`` for the kernel files): an entry made by other
    code than this one is never used."""
    h = hashlib.sha256()
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None:
            raise ImportError(name)
        places = list(spec.submodule_search_locations or [])
        files = [Path(spec.origin)] if spec.origin and not places else []
        for place in places:
            files += sorted(
                p for p in Path(place).rglob("*") if p.is_file() and "__pycache__" not in p.parts
            )
        for path in files:
            h.update(path.name.encode())
            h.update(path.read_bytes())
    return h.hexdigest()
