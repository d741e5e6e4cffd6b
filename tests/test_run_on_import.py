"""``gpurace run`` hooks an API when the program imports it (gpurace/run/on_import.py):
right after the package's own code ran, once; a program that never imports wgpu
does not load it under gpurace either."""

import importlib
import subprocess
import sys
from pathlib import Path

from gpurace.run.on_import import WhenImported, patchable

ROOT = Path(__file__).resolve().parent.parent


def test_then_runs_once_after_the_package_code(tmp_path, monkeypatch):
    pkg = tmp_path / "gr_probe_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("VALUE = 41\n")
    (pkg / "sub.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    finder = WhenImported("gr_probe_pkg", lambda: seen.append(sys.modules["gr_probe_pkg"].VALUE))
    sys.meta_path.insert(0, finder)
    try:
        import gr_probe_pkg.sub  # noqa: F401  (the parent's import fires it)

        module = sys.modules["gr_probe_pkg"]
        assert seen == [41]  # after __init__ ran, before the program's next statement
        assert finder not in sys.meta_path and finder.fired
        assert "exec_module" not in vars(module.__spec__.loader)  # the loader as it was
        assert module.__spec__.origin == str(pkg / "__init__.py")
    finally:
        finder.remove()
        for name in ("gr_probe_pkg.sub", "gr_probe_pkg"):
            sys.modules.pop(name, None)


def test_other_imports_and_a_failed_import_do_not_fire(tmp_path, monkeypatch):
    (tmp_path / "gr_probe_bad.py").write_text("raise ValueError('broken')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    finder = WhenImported("gr_probe_bad", lambda: seen.append(1))
    sys.meta_path.insert(0, finder)
    try:
        import json  # noqa: F401

        try:
            import gr_probe_bad  # noqa: F401
        except ValueError:
            pass
        assert seen == [] and finder in sys.meta_path  # the program's error, not hooked
        (tmp_path / "gr_probe_bad.py").write_text("VALUE = 2\n")
        importlib.invalidate_caches()
        import gr_probe_bad  # noqa: F401, F811  (fixed: now it fires, once)

        assert seen == [1] and finder not in sys.meta_path
    finally:
        finder.remove()
        sys.modules.pop("gr_probe_bad", None)


def test_an_opencl_program_does_not_load_wgpu(tmp_path):
    prog = tmp_path / "cl_only.py"
    prog.write_text(
        "import sys\nimport pyopencl\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('wgpu', 'cupy')))\n"
    )
    p = subprocess.run(
        [sys.executable, "-m", "gpurace", "run", "--", "python", str(prog)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert p.stdout == "[]\n", p.stderr
    assert p.returncode == 2 and "no compute launch was selected" in p.stderr, p.stderr


def test_only_a_loader_object_is_wrapped():
    """A class used as a loader (builtins) or an object without a __dict__ is not
    patched: hook_apis installs such a package's hooks at once instead."""
    import json

    assert patchable(json.__spec__.loader)
    assert not patchable(importlib.machinery.BuiltinImporter)
    assert not patchable(None)
