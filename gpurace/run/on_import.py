"""Install a GPU API's hooks when the program imports that API, not before.

``gpurace run`` used to install every hook module at its start, and a hook module
imports its API to wrap it: a pyopencl program paid for wgpu-native (~0.1 s of CPU
on two cores: wgpu's modules, the native library, its header from the cache), and a
wgpu program for cupy where it is installed. Now a hook module whose package (its
entry in ``HOOK_MODULES``) is not imported yet is installed after the program's first
import of that package has run the package's ``__init__``: before the program's
next statement, so before any object of that API exists (a program cannot launch
through an API it has not imported). A package imported already, by gpurace or the
program's caller, is hooked at once, as before; one that is not installed is left
out, as before (its ``ImportError``).

How: a finder first on ``sys.meta_path`` answers no import itself. At the package's
import it asks the other finders for the spec, and wraps that spec's loader's
``exec_module`` (on that loader object alone, put back once it ran) so that the hook
module's ``install`` runs right after the package's own code.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpurace.run.session import Session


def hook_apis(session: Session) -> Callable[[], None]:
    """Install each hook module of ``HOOK_MODULES`` for `session` now (its package is
    imported) or when the program imports its package; returns the function that
    uninstalls them all (and stops waiting for the packages never imported)."""
    from gpurace.run import HOOK_MODULES

    uninstallers: list[Callable[[], None]] = []
    waiting: list[WhenImported] = []

    def install(name: str) -> None:
        module = importlib.import_module(f"gpurace.run.{name}")
        try:
            uninstallers.append(module.install(session))
        except ImportError:
            pass  # that GPU API is not installed: the program cannot use it either

    for name, package in HOOK_MODULES.items():
        spec = None if package in sys.modules else importlib.util.find_spec(package)
        if package in sys.modules or (spec is not None and not patchable(spec.loader)):
            install(name)  # imported already, or loaded in a way not to wrap: as before
        elif spec is not None:  # None: not installed, so the program cannot use it
            waiting.append(WhenImported(package, functools.partial(install, name)))
            sys.meta_path.insert(0, waiting[-1])

    def unhook() -> None:
        for finder in waiting:
            finder.remove()
        for undo in reversed(uninstallers):
            undo()

    return unhook


def patchable(loader: object) -> bool:
    """Whether `WhenImported` can wrap this loader's exec_module on the object itself
    (a path-based loader; not a class used as a loader, nor an object without a
    __dict__)."""
    return (
        loader is not None
        and not isinstance(loader, type)
        and hasattr(loader, "__dict__")
        and hasattr(loader, "exec_module")
    )


class WhenImported(importlib.abc.MetaPathFinder):
    """Calls ``then()`` once, right after top-level package ``name`` is first
    imported; ``remove()`` takes the finder away if that never happened."""

    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self.name = name
        self.then = then
        self.fired = False
        self._asking = threading.local()  # inside our own find_spec on this thread

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name or self.fired or getattr(self._asking, "on", False):
            return None
        self._asking.on = True
        try:
            spec = _spec_from_others(self, fullname, path, target)
        finally:
            self._asking.on = False
        loader = spec.loader if spec is not None else None
        if not patchable(loader):
            return spec  # `hook_apis` installed such a package's hooks at once
        assert loader is not None
        run_package = loader.exec_module
        own = "exec_module" in vars(loader)  # an attribute of the loader object itself

        def exec_module(module: ModuleType) -> None:
            try:
                run_package(module)
            finally:
                if own:
                    loader.exec_module = run_package  # type: ignore[method-assign]
                else:  # the class's method shows again
                    del loader.exec_module
            self.remove()
            self.then()

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec

    def remove(self) -> None:
        self.fired = True
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def _spec_from_others(
    me: WhenImported, fullname: str, path: Sequence[str] | None, target: ModuleType | None
) -> importlib.machinery.ModuleSpec | None:
    """The spec the finders after `me` give (what the import would have used)."""
    for finder in list(sys.meta_path):
        if finder is me:
            continue
        find: Any = getattr(finder, "find_spec", None)
        if find is None:
            continue
        spec = find(fullname, path, target)
        if spec is not None:
            return spec
    return None
