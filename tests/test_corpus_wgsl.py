"""Every labelled WGSL kernel gives its expected verdict and exactly its race sites."""

import numpy as np
import pytest

from gpurace import api
from gpurace.analysis import analyse
from gpurace.backends import wgpu_backend
from gpurace.instrument.wgsl.overrides import set_overrides
from gpurace.languages.wgsl import aliased_vars
from gpurace.model import RaceClass
from gpurace.target import realias
from tests.corpus import assert_matches_labels, cases, expected, reported

CASES = cases("wgsl", ".wgsl")


def test_corpus_is_large_enough():
    assert len(CASES) >= 40


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_verdict_and_sites(case):
    source, spec = case.load()
    report = api.check(source, spec, path=str(case.kernel))
    assert_matches_labels(report, spec.expect)


def _run(case, instrumented: bool):
    source, spec = case.load()
    source = set_overrides(source, spec.overrides, spec.path)
    inst = api.instrument(source, str(case.kernel))
    dev = wgpu_backend.get_device()[0]
    entries = inst.entry_points or {inst.entry: inst.workgroup_size}
    name = spec.entry or next(iter(entries))
    data = {(b.group, b.binding): b.data for b in spec.buffers}
    views = {(b.group, b.binding): (b.alias, b.offset) for b in spec.buffers if b.alias}
    result = wgpu_backend.launch(
        dev,
        inst.source if instrumented else source,
        str(case.kernel),
        name,
        inst.bindings,
        data,
        tuple(spec.workgroups),
        log_group=inst.log_group if instrumented else None,
        log_capacity=1 << 16 if instrumented else 0,
        aliases=views,
    )
    return dev, inst, spec, result


@pytest.mark.parametrize(
    "case", [c for c in CASES if c.load()[1].expect["verdict"] != "race"], ids=lambda c: c.id
)
def test_race_free_outputs_bit_identical(case):
    _, _, _, plain = _run(case, instrumented=False)
    _, _, _, inst = _run(case, instrumented=True)
    assert plain.outputs.keys() == inst.outputs.keys()
    for key, out in plain.outputs.items():
        assert np.array_equal(out.view(np.uint8), inst.outputs[key].view(np.uint8)), key


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_device_analysis_equals_reference_on_corpus_logs(case):
    dev, inst, spec, result = _run(case, instrumented=True)
    assert result.requested <= result.capacity
    log = realias(wgpu_backend.read_log(dev, result), aliased_vars(inst, spec))
    spaces = {v.id: v.space for v in inst.variables}
    for uniform_race in (False, True):
        ref = analyse(log, spaces, uniform_writes_race=uniform_race)
        got = wgpu_backend.analyse_records(dev, log, api.var_bases(inst, spec), uniform_race)
        assert got.saturated == []
        assert got.races == ref


def test_aliased_bindings_are_one_buffer():
    """alias_view_neighbour's races exist only because bindings 0 and 1 are one buffer:
    given two buffers (the same tables without alias), the same kernel is race-free;
    alias_disjoint_halves is clean only because its alias starts at byte 512."""
    case = next(c for c in CASES if c.id == "alias_view_neighbour")
    source, spec = case.load()
    assert len(api.check(source, spec, path=str(case.kernel)).races) == 2
    spec.buffers[1].alias = None  # binding 1 as a buffer of its own
    assert api.check(source, spec, path=str(case.kernel)).races == []
    case = next(c for c in CASES if c.id == "alias_disjoint_halves")
    source, spec = case.load()
    assert api.check(source, spec, path=str(case.kernel)).races == []
    spec.buffers[1].offset = 0  # dst[i] is now src[i], read by work-item i - 1
    report = api.check(source, spec, path=str(case.kernel))
    # words 1-63 and 65-127 within a group, words 0 and 64 across the two groups
    assert [(r.cls, r.instances, r.pairs) for r in report.races] == [
        (RaceClass.GLOBAL_INTRA, 126, 126),
        (RaceClass.GLOBAL_INTER, 2, 2),
    ]


def test_many_sweeps_of_storage_exchange_stay_complete():
    """The motivating Gauss-Seidel through a storage buffer, with 40 sweeps instead of 4:
    160 storageBarrier() epochs on the same words, same warnings, nothing saturated."""
    case = next(c for c in CASES if c.id == "gauss_seidel_rb_storage")
    source, spec = case.load()
    assert "sweep < 4u" in source
    report = api.check(source.replace("sweep < 4u", "sweep < 40u"), spec, path=str(case.kernel))
    assert report.scope.complete, report.scope
    assert reported(report) == expected(spec.expect)
    assert report.warnings and not report.errors
