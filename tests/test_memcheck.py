"""Out-of-bounds accesses (docs/memcheck.md): found before the access, redirected, and
reported like races with exact sites, indices, sizes and counts, on WGSL (lavapipe)
and OpenCL C (PoCL); the labelled cases are tests/corpus/memcheck/."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from gpurace import abi, api
from gpurace.analysis import memcheck
from gpurace.backends import opencl_backend, wgpu_backend
from gpurace.instrument.wgsl import instrument as wgsl_instrument
from gpurace.languages import opencl
from gpurace.launch import LaunchSpec
from gpurace.model import Kind, OutOfBounds, pack_flags
from gpurace.options import Options
from gpurace.report import sarif, suppress, to_json
from gpurace.report.common import work_item
from gpurace.report.text import format_text
from tests.corpus import CORPUS, cases, expected, reported

MEMCHECK = CORPUS / "memcheck"
CASES = cases("memcheck/wgsl", ".wgsl") + cases("memcheck/opencl", ".cl")
SCHEMA = json.loads((Path(__file__).parent.parent / "docs/gpurace-report.schema.json").read_text())


def _oob_labels(report) -> list[tuple]:
    found = []
    for o in report.out_of_bounds:
        site = report.sites[o.site]
        var = next(v for v in report.variables if v.id == o.var)
        index = o.index
        size = o.bound
        if o.unit == abi.OOB_BYTES:  # attributed by address: bytes from the base
            index, size = index // var.elem_stride, size // var.elem_stride
        gid = work_item(report, o.group, o.lid).global_id
        found.append((f"{site.line}:{site.col}", site.kind.name.lower(), var.name, index, size,
                      o.count, list(gid)))  # fmt: skip
    return sorted(found)


def _expected_oob(expect: dict) -> list[tuple]:
    return sorted(
        (o["at"], o["kind"], o["var"], o["index"], o["size"], o["count"], o["work_item"])
        for o in expect.get("oob", [])
    )


@pytest.fixture(scope="module")
def reports():
    """Each labelled case checked once (shared by the tests below)."""
    out = {}
    for case in CASES:
        source, spec = case.load()
        out[case.id + "." + case.language] = (
            case,
            api.check(source, spec, path=str(case.kernel)),
        )
    return out


def test_corpus_has_every_labelled_shape():
    ids = {f"{c.language}/{c.id}" for c in CASES}
    assert ids == {
        "wgsl/storage_write_past_end", "wgsl/workgroup_read_past_end", "wgsl/race_and_oob",
        "wgsl/bounds_checked_clean", "opencl/global_read_past_end",
        "opencl/local_write_past_end", "opencl/race_and_oob", "opencl/bounds_checked_clean",
    } | {  # initcheck's (tests/test_initcheck.py)
        f"{lang}/{name}" for lang in ("wgsl", "opencl") for name in (
            "reduce_reads_unwritten", "uninit_buffer_read_first", "race_and_uninit",
            "written_before_read_clean")
    } | {"wgsl/partly_written_tile", "opencl/partly_written_local",
         "opencl/copies_and_builtins_write"}  # fmt: skip


def test_labelled_sites_indices_sizes_and_counts(reports):
    for name, (case, report) in reports.items():
        expect = case.load()[1].expect
        assert reported(report) == expected(expect), name
        assert _oob_labels(report) == _expected_oob(expect), name
        assert report.scope.complete, (name, report.scope)
        assert report.exit_code == (0 if expect["verdict"] == "clean" else 1), name
        if expect["verdict"] in ("oob", "uninit"):
            assert report.races == [] and (report.oob_errors or report.uninit_errors), name


def test_text_report_names_buffer_index_size_and_ids(reports):
    _, report = reports["storage_write_past_end.wgsl"]
    text = format_text(report, cwd=str(MEMCHECK.parent.parent.parent))
    assert text.startswith(
        "tests/corpus/memcheck/wgsl/storage_write_past_end.wgsl:9:5: error: out-of-bounds "
        "write to storage buffer 'dst[128]' (size 128 elements)\n"
        "  kernel 'main', launch 0: outside 'dst': the access was left out and the launch "
        "went on\n"
        "  write  by global (127,0,0) local (63,0,0) group (1,0,0)  at "
        "tests/corpus/memcheck/wgsl/storage_write_past_end.wgsl:9:5\n"
    )
    assert "\n1 out-of-bounds access at 1 site (1 error) in kernel 'main'\n" in text
    _, report = reports["global_read_past_end.opencl"]
    assert (
        format_text(report)
        .split("\n")[0]
        .endswith(
            "global_read_past_end.cl:4:12: error: out-of-bounds read of global memory 'in[128]' "
            "(byte 512, size 128 elements)"
        )
    )


def test_json_and_sarif_carry_the_class(reports):
    _, report = reports["race_and_oob.opencl"]
    doc = to_json(report)
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    assert doc["summary"]["errors"] == 2 and doc["exit_code"] == 1
    assert [(o["access"]["site"]["kind"], o["var"], o["index"], o["byte"], o["size"],
             o["count"]) for o in doc["out_of_bounds"]] == [
        ("load", "partial", 31, 124, 31, 2), ("store", "partial", 31, 124, 31, 2)]  # fmt: skip
    log = sarif.to_sarif(report)
    rules = [r["id"] for r in log["runs"][0]["tool"]["driver"]["rules"]]
    results = [r for r in log["runs"][0]["results"] if r["ruleId"] == "gpurace/out-of-bounds"]
    assert len(results) == 2 and all(rules[r["ruleIndex"]] == r["ruleId"] for r in results)
    assert results[0]["message"]["text"] == doc["out_of_bounds"][0]["message"]
    _, clean = reports["bounds_checked_clean.wgsl"]
    doc = to_json(clean)
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    assert doc["out_of_bounds"] == []
    assert "gpurace/out-of-bounds" not in json.dumps(sarif.to_sarif(clean))


def test_suppressed_by_class(reports, tmp_path):
    case, _ = reports["workgroup_read_past_end.wgsl"]
    source, spec = case.load()
    report = api.check(source, spec, path=str(case.kernel))
    (tmp_path / "s.toml").write_text('[[suppress]]\nrule = "out-of-bounds"\nreason = "known"\n')
    sup = suppress.load(str(tmp_path / "s.toml"))
    sup.apply(report)
    assert report.exit_code == 0 and report.oob_errors == [] and sup.unused == []
    assert "suppressed (1):" in format_text(report)
    (tmp_path / "r.toml").write_text('[[suppress]]\nrule = "local"\nreason = "other"\n')
    other = suppress.load(str(tmp_path / "r.toml"))
    report.suppressed.clear()
    other.apply(report)
    assert report.exit_code == 1 and len(other.unused) == 1


def test_reference_deduplicates_independently_of_order():
    def rec(site, kind, var, index, group, lid):
        flags = pack_flags(int(kind), 0, 0, var)
        return [site, flags, index & 0xFFFFFFFF, lid, group, 0, 10, abi.OOB_ELEMENTS]

    recs = [rec(3, Kind.STORE, 1, 10 + k, 1 - k % 2, 5 - k) for k in range(5)]
    recs += [rec(2, Kind.LOAD, 0, -2, 0, 7)]
    want = [
        OutOfBounds(2, Kind.LOAD, 0, -2, 10, abi.OOB_ELEMENTS, 0, 1, 0, 7),
        OutOfBounds(3, Kind.STORE, 1, 13, 10, abi.OOB_ELEMENTS, 0, 5, 0, 2),
    ]
    for seed in range(4):
        random.Random(seed).shuffle(recs)
        assert memcheck.deduplicate(recs) == want
    area = np.zeros(abi.OOB_AREA_WORDS, np.uint32)
    area[0] = len(recs)
    area[1 : 1 + len(recs) * abi.RECORD_WORDS] = np.array(recs, np.uint32).ravel()
    assert memcheck.analyse(area) == (want, 6)
    area[0] = 100  # more counted than the slots hold: every slot is read
    assert len(memcheck.area_records(area)[1]) == abi.OOB_SLOTS


def test_checks_cost_one_compare_and_none_where_static():
    """A dynamic index gets one compare (against the fixed count or arrayLength); a
    constant index into a fixed array none; into a runtime-sized array one. (`i` goes
    up to 15 here: below the array's 8 it would need none, next test.)"""
    src = (
        "@group(0) @binding(0) var<storage, read_write> b: array<u32>;\n"
        "var<workgroup> t: array<u32, 8>;\n"
        "@compute @workgroup_size(16)\n"
        "fn main(@builtin(local_invocation_index) i: u32) {\n"
        "  t[3] = 1u;\n  t[i] = 2u;\n  b[i] = t[7];\n  b[5] = 0u;\n}\n"
    )
    text = wgsl_instrument(src, "k.wgsl").source
    # t[i], b[i], b[5]: one guard key each, counted in private variables and recorded
    # by the exit's flush (no atomic at the guard: bounds.py)
    assert text.count(" += 1u; if _gr_on") == 3
    # the definition, then the flush's one call in its loop over the keys that counted
    assert text.count("_gr_orec(") == 1 + 1
    assert len(re.findall(r"let t\d+ = _gr_on\d+ != 0u", text)) == 3
    assert "_gr_oflush();" in text
    assert text.count("if _gr_i0 >= 8u {") == 1
    assert text.count("if _gr_i0 >= arrayLength(&b) {") == 1
    assert text.count("if 5u >= arrayLength(&b) {") == 1


# Each access names its index in a comment; the test lists those that keep a check.
RANGES = """
const T: u32 = 16u;
@group(0) @binding(0) var<storage, read_write> b: array<u32>;
var<workgroup> t: array<u32, 256>;
var<workgroup> s: array<u32, 16>;
@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) l: vec3<u32>,
        @builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) w: vec3<u32>) {
  t[l.y * T + l.x] = 1u;           // 255 at most: none
  t[lid] = 2u;                     // 255: none
  s[l.x] = 3u;                     // 15: none
  s[l.y + 1u] = 4u;                // 16: checked
  t[lid + 1u] = 5u;                // 256: checked
  s[w.x] = 6u;                     // a workgroup id: checked
  s[lid % 16u] = 7u;               // 15: none
  s[min(lid, 15u)] = 8u;           // 15: none
  s[lid - 1u] = 9u;                // a subtraction wraps: checked
  let r = l.y / 2u;                // 7
  s[r * 2u + 1u] = 10u;            // 15: none
  for (var k = 0u; k < T; k++) {
    b[0] = t[k * T + l.x];         // 255: none (b's constant index into a runtime array: checked)
  }
  for (var k = 0u; k <= T; k++) {
    s[k] = 11u;                    // 16: checked
  }
  for (var k = 0u; k < T; k++) {
    k += 1u;
    s[k] = 12u;                    // assigned in the body: checked
  }
  for (var h = 8u; h > 0u; h = h / 2u) {
    if (lid < h) {
      s[lid + h] = 13u;            // h 8 at most (halved), lid 7 under the if: none
    }
  }
  for (var h = 8u; h > 0u; h--) {
    s[h + 8u] = 14u;               // a decrement is not taken as lowering: checked
  }
  if (lid <= 15u) {
    s[lid] = 15u;                  // 15 in the then-block: none
  } else {
    s[lid] = 16u;                  // but not in the else: checked
  }
  if (lid < 17u) {
    s[lid] = 17u;                  // 16: checked
  }
}
"""


def test_indices_below_their_count_get_no_check():
    """An index the module's text bounds below its fixed array's count (builtins by the
    workgroup size, constants, lets, a `for` counter under its condition or halved
    from its start, an immutable name under an `if`'s `x < e`, + * / % & min of
    those: gpurace/instrument/wgsl/ranges.py) gets no check; one it does not, or that
    may reach the count, keeps its own."""
    text = wgsl_instrument(RANGES, "k.wgsl").source
    checked = re.findall(r"if (_gr_i\d|\d+u) >= (\w+\(&\w+\)|\d+u) \{", text)
    assert sorted(b for _, b in checked) == sorted(
        ["16u", "256u", "16u", "16u", "arrayLength(&b)", "16u", "16u", "16u", "16u", "16u"]
    )


def _wgsl_outputs(case):
    source, spec = case.load()
    inst = api.instrument(source, str(case.kernel))
    return wgpu_backend.launch(
        wgpu_backend.get_device()[0], inst.source, str(case.kernel), inst.entry,
        inst.bindings, {(b.group, b.binding): b.data for b in spec.buffers},
        tuple(spec.workgroups), log_group=inst.log_group, log_capacity=1 << 12,
        var_bases=api.var_bases(inst, spec),
    )  # fmt: skip


def _opencl_outputs(case):
    source, spec = case.load()
    target = opencl.target(source, spec, str(case.kernel), opencl_backend, None,
                           Options(prefilter=False), read_outputs=True)  # fmt: skip
    return target.run(0, api.FULL_RANGE, 1 << 12)


def test_faulting_accesses_are_redirected_and_the_launch_goes_on(reports):
    """A read out of bounds gives 0, a write is left out, every other work-item runs."""
    case, _ = reports["global_read_past_end.opencl"]
    result = _opencl_outputs(case)
    x = np.arange(128, dtype=np.float32)
    want = (x + np.append(x[1:], 0.0).astype(np.float32)) * np.float32(0.5)
    assert np.array_equal(result.outputs[(0, 1)], want)
    assert result.oob is not None and result.oob[0] == 1
    case, _ = reports["storage_write_past_end.wgsl"]
    result = _wgsl_outputs(case)
    dst = result.outputs[(0, 1)]
    assert dst[0] == 0 and np.array_equal(dst[1:], np.arange(127, dtype=np.float32) * 2)


def test_more_faults_than_slots_saturate_with_counts_as_lower_bounds():
    src = (
        "@group(0) @binding(0) var<storage, read_write> b: array<u32>;\n"
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n  b[g.x + 64u] = g.x;\n}\n"
    )
    spec = LaunchSpec.from_dict(
        {"entry": "main", "workgroups": [2, 1, 1],
         "binding": [{"group": 0, "binding": 0, "type": "u32", "count": 64}]}
    )  # fmt: skip
    report = api.check(src, spec, path="k.wgsl")
    assert report.exit_code == 1 and not report.scope.complete
    assert report.scope.saturated == [memcheck.saturation(128)]
    # which 64 of the 128 the slots hold depends on the order the work-items ran
    [found] = report.out_of_bounds
    assert (found.count, found.bound, found.kind) == (abi.OOB_SLOTS, 64, Kind.STORE)
    assert 64 <= found.index < 192


def test_several_faults_of_one_invocation_count_each_and_show_the_least():
    """WGSL records an invocation's faults where it exits (bounds.py): one record per
    faulting access, each with the least (signed) index of its site's faults in that
    invocation, so the counts and examples are those of records written at each access.
    The exit's flush walks the keys that counted one in key order: line 5's key, between
    the two, never does."""
    src = (
        "@group(0) @binding(0) var<storage, read_write> b: array<u32>;\n"
        "@compute @workgroup_size(4)\n"
        "fn main(@builtin(local_invocation_index) i: u32) {\n"
        "  for (var k = 0u; k < 4u; k++) { b[i + k] = k; }\n"
        "  b[i] = 0u;\n"
        "  for (var k = 0; k < 2; k++) { b[k * 6 - 1] = 9u; }\n"
        "}\n"
    )
    spec = LaunchSpec.from_dict(
        {"entry": "main", "workgroups": [1, 1, 1],
         "binding": [{"group": 0, "binding": 0, "type": "u32", "count": 4}]}
    )  # fmt: skip
    report = api.check(src, spec, path="k.wgsl", options=Options(tools=("memcheck",)))
    found = [(o.count, o.index, o.bound, o.lid, report.sites[o.site].line) for o in
             report.out_of_bounds]  # fmt: skip
    # line 4: work-item i faults at i + k >= 4: 1 + 2 + 3 times, the least index 4 (i = 1)
    # line 6: every work-item at -1 and 5, the least (signed) -1 at work-item 0
    assert sorted(found) == [(6, 4, 4, 1, 4), (8, -1, 4, 0, 6)]
    assert report.scope.complete
