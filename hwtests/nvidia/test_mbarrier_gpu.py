"""mbarriers on an NVIDIA GPU (docs/protocols.md, "The GPU path"): the instrumented
kernel's shadow gives the phases, so the ring pipelines are clean and complete there
as on sim, and the protocol is checked from the run's log: the overtaking that
tests/test_mbarrier_shadow.py forces in every order is reported with the log check's
scope (hwtests/run.sh runs this when nvidia-smi answers). Not yet run on a GPU when
written (no GPU was lent to that session)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpurace.analysis import protocol_log
from gpurace.cli import main
from tests.corpus import CORPUS
from tests.test_mbarrier_shadow import OVERTAKEN


def _check(kernel: Path, launch: Path, out: Path) -> tuple[int, dict, str]:
    args = ["check", str(kernel), "--launch", str(launch), "--json", str(out)]
    result = CliRunner().invoke(main, args)
    return result.exit_code, json.loads(out.read_text()), result.output


@pytest.mark.parametrize(
    "kernel",
    [
        "cuda/mbarrier_pipeline_clean",
        "cuda/bulk_copy_pipeline_clean",
        "mbarrier/pipeline_clean",
    ],  # fmt: skip
)
def test_the_pipelines_are_clean_and_complete_on_the_gpu(kernel: str, tmp_path: Path) -> None:
    code, doc, text = _check(
        CORPUS / f"{kernel}.cu", CORPUS / f"{kernel}.toml", tmp_path / "r.json"
    )
    assert "sim" not in doc["device"]
    assert code == 0 and doc["races"] == [] and doc["protocol"] == [], text
    assert doc["scope"]["complete"], doc["scope"]
    assert doc["scope"]["protocol_search"] == protocol_log.SCOPE


def test_the_log_check_reports_a_forced_overtaking_on_the_gpu(tmp_path: Path) -> None:
    kernel, launch = tmp_path / "w.cu", tmp_path / "w.toml"
    kernel.write_text(OVERTAKEN)
    launch.write_text(
        'grid = [1]\nblock = [64]\n[[arg]]\ntype = "int"\ncount = 64\nfill = "arange"\n'
        '[[arg]]\ntype = "int"\ncount = 64\n'
    )
    code, doc, text = _check(kernel, launch, tmp_path / "r.json")
    assert code == 1, text
    (e,) = doc["protocol"]
    assert (e["kind"], e["location"]["line"]) == ("phase-overtaken", 11)
    assert e["details"][1:] == [
        "producer: CTA 0, thread 0, line 8, arrival for phase 1",
        "consumer: CTA 0, thread 32, line 11, phase 0 not yet observed",
    ]
    kernel.write_text(OVERTAKEN.replace("r < 3", "r < 1"))
    code, doc, text = _check(kernel, launch, tmp_path / "r.json")
    assert code == 0 and doc["protocol"] == [], text
