"""The C analysis kernels (shaders/analysis.cl on PoCL) equal the NumPy reference:
the tests of test_analysis_equivalence.py, run on an OpenCL queue, and the same
race tables, example orders and --all lists as the WGSL kernels."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpurace.abi import (
    F_ASYNC_SHIFT,
    F_GRID_SHIFT,
    F_NAMED_SHIFT,
    F_OWNC_SHIFT,
    GPHASE_SHIFT,
    KIND_EVENT,
    OWN_SEQ_SHIFT,
    W_EPOCH,
    W_EXTRA,
    W_FLAGS,
    X_WEPOCH_SHIFT,
)
from gpurace.analysis import analyse
from gpurace.backends import opencl_backend
from gpurace.model import RaceClass
from tests import test_analysis_equivalence as shared
from tests.analysis_backends import opencl, wgpu
from tests.logs import VAR_SPACES, random_log


@pytest.fixture(scope="module")
def backend():
    return opencl()


test_device_equals_reference_on_random_logs = shared.test_device_equals_reference_on_random_logs
test_empty_log_is_clean = shared.test_empty_log_is_clean
test_address_ranges_merge_to_the_whole = shared.test_address_ranges_merge_to_the_whole
test_events_beyond_the_direct_mapped_ordinals = shared.test_events_beyond_the_direct_mapped_ordinals
test_buckets_either_side_of_the_walk_cache_equal_the_reference = (
    shared.test_buckets_either_side_of_the_walk_cache_equal_the_reference
)
test_bucket_larger_than_the_walk_cache_is_streamed = (
    shared.test_bucket_larger_than_the_walk_cache_is_streamed
)
test_all_instances_are_listed_the_first_being_the_example = (
    shared.test_all_instances_are_listed_the_first_being_the_example
)
test_tables_too_small_split_the_range = shared.test_tables_too_small_split_the_range
test_exit_beside_a_predicted_barrier_is_divergence = (
    shared.test_exit_beside_a_predicted_barrier_is_divergence
)


@pytest.mark.parametrize("seed", range(6))
def test_same_tables_as_the_wgsl_kernels(backend, seed):
    """Bit for bit what the WGSL kernels hand back: races, the example orders the
    merge of ranges uses, the --all list (in any order) and the table sizes."""
    log = random_log(500 + seed, n=200, spread=16 if seed % 2 else 200, ordinals=20)
    got = backend.analyse_range(log, (0, 0xFFFFFFFF), list_instances=1 << 12)
    want = wgpu().analyse_range(log, (0, 0xFFFFFFFF), list_instances=1 << 12)
    assert got.saturated == want.saturated == []  # else which race keys overflow varies
    assert got.races == want.races and got.races
    assert got.orders == want.orders
    assert sorted(got.listed, key=repr) == sorted(want.listed, key=repr)
    assert (got.live_buckets, got.table_bytes) == (want.live_buckets, want.table_bytes)


@pytest.mark.parametrize("seed", range(8))
def test_warp_epochs_device_equals_reference(backend, seed):
    """Logs of two CUDA warps whose accesses carry warp epochs (docs/ordering.md): the
    C kernels equal the reference, and the warp rule does order some pairs (the same
    log without its warp epochs has races that this one does not)."""
    log = random_log(900 + seed, n=120, spread=8, warps=True)
    expected = analyse(log, VAR_SPACES)
    got = backend.analyse_records(log)
    assert got.saturated == []
    assert got.races == expected and expected
    flat = log.copy()
    flat[:, W_EXTRA] &= (1 << X_WEPOCH_SHIFT) - 1
    unordered = analyse(flat, VAR_SPACES)
    assert sum(r.pairs for r in unordered) > sum(r.pairs for r in expected)


@pytest.mark.parametrize("seed", range(8))
def test_named_barrier_states_device_equals_reference(backend, seed):
    """Logs of a block whose accesses carry named-barrier states (docs/ordering.md,
    "Named barriers"): the C kernels equal the reference, and the rule does order
    some pairs (the same log without the states has races that this one does not)."""
    log = random_log(1700 + seed, n=120, spread=8, named=True)
    expected = analyse(log, VAR_SPACES)
    got = backend.analyse_records(log)
    assert got.saturated == []
    assert got.races == expected and expected
    flat = log.copy()
    access = flat[:, W_FLAGS] & 3 != KIND_EVENT  # events keep their event field
    flat[access, W_FLAGS] &= (1 << F_NAMED_SHIFT) - 1
    unordered = analyse(flat, VAR_SPACES)
    assert sum(r.pairs for r in unordered) > sum(r.pairs for r in expected)


@pytest.mark.parametrize("seed", range(8))
def test_grid_phases_device_equals_reference(backend, seed):
    """Logs whose global accesses carry grid phases 0-2 (cooperative groups'
    grid.sync(); docs/ordering.md, "Grid barriers"): the C kernels equal the
    reference, and the phases do order some pairs of groups (the same log without
    the grid bit has races that this one does not)."""
    log = random_log(1900 + seed, n=150, spread=8)
    rng = np.random.default_rng(seed)
    glob = (log[:, W_FLAGS] & 3 != KIND_EVENT) & ((log[:, W_FLAGS] >> 2) & 1 == 0)
    phase = rng.integers(0, 3, len(log)).astype(np.uint32)
    log[glob, W_EPOCH] |= phase[glob] << GPHASE_SHIFT
    log[glob, W_FLAGS] |= 1 << F_GRID_SHIFT
    expected = analyse(log, VAR_SPACES)
    got = backend.analyse_records(log)
    assert got.saturated == []
    assert got.races == expected and expected
    flat = log.copy()
    flat[glob, W_FLAGS] &= ~np.uint32(1 << F_GRID_SHIFT)
    unordered = analyse(flat, VAR_SPACES)
    inter = RaceClass.GLOBAL_INTER
    assert sum(r.pairs for r in unordered if r.cls == inter) > sum(
        r.pairs for r in expected if r.cls == inter
    )


def test_the_program_is_built_once_per_context(backend):
    ctx = backend.device.context
    assert opencl_backend.analysis_program(ctx) is opencl_backend.analysis_program(ctx)


def test_the_cuda_prelude_defines_what_the_opencl_one_does():
    """analysis.cl uses only prelude names; both preludes define the same ones."""
    names = {}
    for api in ("opencl", "cuda"):
        text = opencl_backend.c_source("analysis.cl", api).split("#line 1")[0]
        names[api] = set(re.findall(r"^#define (\w+)", text, re.M))
    assert names["opencl"] == names["cuda"]
    assert {"KERNEL", "GLOBAL", "GID", "ATOMIC_ADD", "ATOMIC_CAS"} <= names["cuda"]


def test_the_kernels_are_free_of_data_races_under_oclgrind():
    """Oclgrind's checker finds no data race (by OpenCL 1.2's memory model: every
    word shared during a kernel is accessed atomically) and no invalid access."""
    root = Path(__file__).parent.parent
    env = os.environ | {"OCLGRIND_DATA_RACES": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "tests.oclgrind_check"],
        cwd=root, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("equal to the reference: True") == 3, run.stdout
    assert "Kernel: " not in run.stderr, run.stderr  # each of its reports names the kernel


@pytest.mark.parametrize("seed", range(6))
def test_own_copy_fields_device_equals_reference(backend, seed):
    """Logs whose plain accesses carry the own-copy fields of docs/async.md rule 5
    (cp.async records: a copy's number; plain accesses: copies issued and in flight):
    the C kernels equal the reference, and some races are a work-item against its own
    copy (words only one work-item touches included: the shadow counts a copy's
    record as several actors)."""
    log = random_log(2300 + seed, n=200, groups=2, lids=2, spread=32)
    rng = np.random.default_rng(seed)
    plain = log[:, W_FLAGS] & 3 < 2  # loads and stores: atomics carry no field
    which = rng.integers(0, 3, len(log)).astype(np.uint32)  # 0 none, 1 copy, 2 plain
    seq = rng.integers(0, 4, len(log)).astype(np.uint32)
    flight = rng.integers(0, 3, len(log)).astype(np.uint32)
    field = np.where(which == 1, seq << OWN_SEQ_SHIFT, seq << OWN_SEQ_SHIFT | flight)
    mark = plain & (which > 0)
    log[mark, W_FLAGS] |= np.where(which == 1, 1 << F_ASYNC_SHIFT, 1 << F_OWNC_SHIFT)[mark].astype(
        np.uint32
    )
    log[mark, W_EXTRA] |= field[mark].astype(np.uint32)
    expected = analyse(log, VAR_SPACES)
    got = backend.analyse_records(log)
    assert got.saturated == []
    assert got.races == expected
    assert any((r.group_a, r.lid_a) == (r.group_b, r.lid_b) for r in expected)
    flat = log.copy()
    flat[:, W_FLAGS] &= ~np.uint32(1 << F_ASYNC_SHIFT | 1 << F_OWNC_SHIFT)
    unordered = analyse(flat, VAR_SPACES)
    assert {r.key for r in unordered} < {r.key for r in expected}


def test_a_shadow_shorter_than_the_range_changes_no_race(backend, monkeypatch):
    """A few records over a wide range get an analysis shadow of S_WORDS_PER_RECORD
    words a record (`analysis_driver.shadow_words`), not one per word of the range:
    the words past it go to the tables (more live buckets), and the races, example
    orders and --all list are the reference's and the whole-range shadow's."""
    from gpurace.backends import analysis_driver

    log = random_log(31, n=200, spread=200)  # many words of one work-item
    wide = {"address_end": 64 << 20, "list_instances": 1 << 12}
    limit = opencl_backend.analysis_limit(backend.device)
    assert analysis_driver.shadow_words(64 << 20, len(log), limit) == 16 * len(log)
    short = backend.analyse_range(log, (0, 0xFFFFFFFF), **wide)
    monkeypatch.setattr(analysis_driver, "S_WORDS_PER_RECORD", 1 << 30)
    whole = backend.analyse_range(log, (0, 0xFFFFFFFF), **wide)
    assert short.saturated == whole.saturated == []
    assert short.races == whole.races == analyse(log, VAR_SPACES)
    assert short.races and short.orders == whole.orders
    assert sorted(short.listed, key=repr) == sorted(whole.listed, key=repr)
    assert short.live_buckets > whole.live_buckets  # words past the shadow: in the tables
    assert whole.table_bytes - short.table_bytes > 60 << 20  # a 128 MiB shadow less
