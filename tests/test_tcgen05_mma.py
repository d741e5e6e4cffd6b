"""tcgen05.mma / tcgen05.cp completed through tcgen05.commit's mbarrier phase
(sm_100a, sim only; docs/tmem.md, "MMA, copies and commit"). The kernels are
tests/corpus/cuda/tmem_mma_clean (thread 0 multiplies a 128x16 f16 A by a 16x16 B
into TMEM, commits to an mbarrier, every thread waits and loads its row of D) and
edits of it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from gpurace import abi, api
from gpurace.instrument.ptx import instrument
from gpurace.instrument.ptx.tcgen05_mma import convert, form_word
from gpurace.launch.cuda import load_cuda_launch
from gpurace.model import TCGEN05, TMEM_ELEM, Kind
from gpurace.report import format_text, to_json
from gpurace.report.tmem import WarpPair, warp_pairs
from tests.test_ptx_rewriter import _emulate_launch

CORPUS = Path(__file__).parent / "corpus" / "cuda"
SCHEMA = json.loads((Path(__file__).parent.parent / "docs/gpurace-report.schema.json").read_text())
CLEAN = (CORPUS / "tmem_mma_clean.cu").read_text()
LAUNCH = CORPUS / "tmem_mma_clean.toml"
MMA = '"tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\\n"'
COMMIT = (
    '    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 '
    '[%0];"\n                 :: "r"(mb) : "memory");\n'
)
A = np.arange(2048, dtype=np.float16).astype(np.float64).reshape(128, 16)
B = np.arange(256, dtype=np.float16).astype(np.float64).reshape(16, 16)  # B's rows n, k


def _text(*edits: tuple[str, str]) -> str:
    text = CLEAN
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def _check(tmp_path: Path, *edits: tuple[str, str]):
    kernel = tmp_path / "tmem_mma_clean.cu"
    kernel.write_text(_text(*edits))
    return api.check_file(str(kernel), str(LAUNCH))


def _run(text: str, instrumented: bool, a=None, b=None):
    """The kernel `text` with the clean case's launch on sim (its inputs replaced by the
    f16 arrays `a`, `b` where given): (outputs, records, inst)."""
    launch = load_cuda_launch(str(LAUNCH))
    for arg, new in zip(launch.args, (a, b), strict=False):
        if new is not None:
            arg.buffer.data[...] = new.astype(np.float16).view(arg.buffer.data.dtype)
    inst = instrument(text, "mma.cu", launch.options, arch="compute_100a")
    outputs, records, _, _ = _emulate_launch(launch, inst, instrumented)
    return outputs, records, inst


def _where(report, race) -> tuple[str, str]:
    by_id = {s.id: s for s in report.sites}
    a, b = by_id[race.site_a], by_id[race.site_b]
    return f"{a.line}:{a.col}", f"{b.line}:{b.col}"


@pytest.fixture(scope="module")
def clean_runs():
    """The clean kernel on sim, plain and instrumented (shared: each run costs seconds)."""
    return _run(CLEAN, False), _run(CLEAN, True)


def test_sim_multiplies_the_tiles_bit_for_bit(clean_runs) -> None:
    """D = A B in f32, NumPy's product (every partial sum of these integers is exact),
    in the plain run and the instrumented one alike."""
    (plain, _, _), (outputs, _, _) = clean_runs
    assert plain == outputs
    got = np.frombuffer(plain[2], np.float32).reshape(128, 16)
    assert (got == (A @ B.T).astype(np.float32)).all()


def test_sim_rounds_once_from_exact_products() -> None:
    """Random f16 tiles, the accumulator added in (enable-input-d from a first MMA) and
    B negated (idesc bit 14): each D element is the f64 sum in k order of exact
    products onto the first product's f32 D, rounded once to f32, bit for bit."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((128, 16)).astype(np.float16)
    b = rng.standard_normal((16, 16)).astype(np.float16)
    second = (
        '"setp.ne.u32 p, %4, 0;\\n"\n                 ' + MMA + "\n                 "
        '"setp.ne.u32 p, %4, 1;\\n"\n                 ' + MMA.replace("%3, p", "%5, p")
    )
    text = _text(
        ('"setp.ne.u32 p, %4, 0;\\n"\n                 ' + MMA, second),
        ('"r"(idesc), "r"(0u)', '"r"(idesc), "r"(0u), "r"(idesc | 1u << 14)'),
    )
    outputs, _, _ = _run(text, False, a.reshape(-1), b.reshape(-1))
    got = np.frombuffer(outputs[2], np.float32).reshape(128, 16)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    first = np.zeros((128, 16))
    for k in range(16):
        first = first + a64[:, k, None] * b64[None, :, k]
    want = first.astype(np.float32).astype(np.float64)
    for k in range(16):
        want = want + a64[:, k, None] * -b64[None, :, k]
    assert got.tobytes() == want.astype(np.float32).tobytes()


def test_sim_kind_tf32_reads_the_top_19_bits() -> None:
    """kind::tf32 (idesc A, B type 2): each 32-byte row is 8 f32 words of which the MMA
    reads the top 19 bits; the products are exact, summed in k order, rounded once."""
    rng = np.random.default_rng(11)
    a = rng.standard_normal((128, 8)).astype(np.float32)
    b = rng.standard_normal((16, 8)).astype(np.float32)
    text = _text(
        ("kind::f16 [%0]", "kind::tf32 [%0]"), ("1u << 4 |", "1u << 4 | 2u << 7 | 2u << 10 |")
    )
    outputs, _, _ = _run(
        text, False, a.view(np.float16).reshape(-1), b.view(np.float16).reshape(-1)
    )
    got = np.frombuffer(outputs[2], np.float32).reshape(128, 16)

    def tf32(x: np.ndarray) -> np.ndarray:
        return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)

    want = np.zeros((128, 16))
    for k in range(8):
        want = want + tf32(a)[:, k, None] * tf32(b)[None, :, k]
    assert got.tobytes() == want.astype(np.float32).tobytes()


def test_the_mma_is_logged_once_then_retired(clean_runs) -> None:
    """Thread 0 logs the MMA's reads (A's 128 rows and B's 16, two 16-byte chunks each)
    and its TMEM writes (128 rows x 4 records of 4 columns) at the issue, between its
    two events; the commit logs only the events again (with the phase: the arrival),
    and thread 0's own wait retires it, so the barrier after logs nothing of it."""
    _, records, inst = clean_runs[1]
    sites = {s.id: s for s in inst.sites if s.detail == TCGEN05}
    mine = records[np.isin(records[:, abi.W_SITE], list(sites))]
    assert set(mine[:, abi.W_LID].tolist()) == {0}
    names = {v.id: v for v in inst.variables}
    var = [names[int(f >> 16 & 0xFF)] for f in mine[:, abi.W_FLAGS]]
    loads = [(v.name, int(o)) for v, o, f in zip(var, mine[:, abi.W_OFFSET], mine[:, abi.W_FLAGS],
                                                   strict=True) if f & 3 == 0]  # fmt: skip
    stores = [int(o) for v, o in zip(var, mine[:, abi.W_OFFSET], strict=True) if v.elem_type ==
              TMEM_ELEM]  # fmt: skip
    assert sorted(loads) == sorted([("sa", o) for o in range(0, 4096, 16)]
                                   + [("sb", o) for o in range(0, 512, 16)])  # fmt: skip
    assert sorted(stores) == [row * 2048 + 4 * col for row in range(128) for col in (0, 4, 8, 12)]
    events = [s.id for s in inst.sites if s.kind == Kind.EVENT and "tcgen05.mma" in s.operand]
    assert len(events) == 1
    ev = records[records[:, abi.W_SITE] == events[0]]
    # O_MB_COPY / END at the issue (phase unknown), then at the commit with phase 0
    phases = ev[:, abi.W_VALUE].tolist()
    assert phases == [0xFFFFFFFF, 0xFFFFFFFF, 0, 0]
    assert set(((mine[:, abi.W_FLAGS] >> 8) & 0xFF).tolist()) == {16}


def test_loads_of_d_before_the_wait_race_by_rows(tmp_path: Path) -> None:
    """tmem_mma_early_read_race: each of the four loads of D before the wait races with
    the MMA's writes: each warp on its 32 rows, thread 0 (the issuer, compared with its
    own op in flight: docs/async.md rules 4-7) on row 0 with them, as the race's count
    of 512 instances says; the missing wait named."""
    kernel = CORPUS / "tmem_mma_early_read_race.cu"
    report = api.check_file(str(kernel), str(CORPUS / "tmem_mma_early_read_race.toml"))
    assert [_where(report, r) for r in report.races] == [("45:5", f"{n}:3") for n in range(51, 55)]
    race = report.races[0]
    assert warp_pairs(report, race) == [
        WarpPair(0, w, 0, (32 * w, 32 * w + 31), (0, 3)) for w in range(4)
    ]
    text = format_text(report)
    assert ("no wait on the mbarrier phase that the tcgen05.commit after the tcgen05.mma/cp "
            "at 45:5 arrives on between") in text  # fmt: skip
    assert "  tcgen05.mma (cta_group::1, kind::f16/tf32, M 128" in text  # the scope statement
    assert report.scope.complete
    doc = to_json(report)
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    assert doc["races"][0]["tmem"][1] == {
        "block": 0, "warp_a": 0, "warp_b": 1, "rows": [32, 63], "columns": [0, 3]
    }  # fmt: skip


def test_a_commit_before_the_mma_does_not_complete_it(tmp_path: Path) -> None:
    """The commit only hands on the ops issued before it: committed first, the MMA is
    never released, and the loads of D and the store to A after the wait race with it."""
    moved = COMMIT.replace("    asm", "  asm")
    mma_start = "  if (t == 0) {  // D f32"
    report = _check(tmp_path, (COMMIT, ""), (mma_start, "  if (t == 0)\n" + moved + mma_start))
    assert sorted(_where(report, r) for r in report.races) == [
        ("49:5", f"{n}:3") for n in (55, 56, 57, 58, 61)
    ]


def test_tcgen05_cp_copies_rows_into_tmem(tmp_path: Path) -> None:
    """tcgen05.cp.128x256b of A: row r's 32 bytes land in lane r, columns 0..7 (sim);
    its shared reads and TMEM writes wait for the commit's phase like the MMA's (a
    store to A before the wait races with them)."""
    cp = '"tcgen05.cp.cta_group::1.128x256b [%0], %1;\\n"'
    text = _text((MMA, cp))
    outputs, _, _ = _run(text, False)
    got = np.frombuffer(outputs[2], np.uint32).reshape(128, 16)
    halves = np.arange(2048, dtype=np.float16).view(np.uint16).astype(np.uint32).reshape(128, 8, 2)
    assert (got[:, :8] == halves[:, :, 0] | halves[:, :, 1] << 16).all()
    assert (got[:, 8:] == 0).all()
    wait = "  MB_WAIT(mb, 0);\n"
    report = _check(tmp_path, (MMA, cp), (wait, "  sa[t + 128] = 0;\n" + wait))
    [race] = report.races
    assert _where(report, race) == ("46:5", "51:3") and report.scope.complete


@pytest.mark.parametrize(
    "edit, note",
    [
        (("kind::f16 [%0], %1,", "kind::f8f6f4 [%0], %1,"), "only dense tcgen05.mma"),
        (("(128u >> 4) << 24", "(64u >> 4) << 24"), "tcgen05.mma/cp whose instruction descr"),
        (("| 1ull << 46", "| 1ull << 46 | 1ull << 61"), "tcgen05.mma/cp whose instruction descr"),
    ],
)
def test_unmodelled_forms_are_listed(tmp_path: Path, edit, note) -> None:
    """A kind other than f16/tf32 is listed from the text; an M of 64 or a 128B swizzle
    with 32-byte atoms is found at run time (sync event): incomplete, never clean."""
    report = _check(tmp_path, edit)
    assert not report.scope.complete
    assert any(note in n for n in report.scope.not_instrumented), report.scope.not_instrumented


def test_descriptor_decoding() -> None:
    """The instruction descriptor's modelled forms and the shared descriptor's
    conversion to wgmma's layout (the one home for instrumentation and sim)."""
    idesc = 1 << 4 | 2 << 17 | 8 << 24
    assert form_word(idesc, "f16") == (16, "f16")
    assert form_word(idesc | 1 << 7 | 1 << 10, "f16") == (16, "bf16")
    assert form_word(1 << 4 | 2 << 7 | 2 << 10 | 32 << 17 | 8 << 24, "tf32") == (256, "tf32")
    assert isinstance(form_word(idesc | 1 << 15, "f16"), str)  # A transposed
    assert isinstance(form_word(1 << 4 | 3 << 17 | 8 << 24, "f16"), str)  # N = 24
    desc = 0x40 | 8 << 16 | 16 << 32 | 1 << 46
    assert convert(desc) == 0x40 | 8 << 16 | 16 << 32
    assert convert(desc | 2 << 61) == 0x40 | 8 << 16 | 16 << 32 | 1 << 62  # 128B
    assert convert(0x40 | 64 << 32 | 1 << 46 | 2 << 61) == 0x40 | 64 << 32 | 1 << 62
    assert isinstance(convert(desc | 1 << 61), str)
    assert isinstance(convert(desc | 1 << 49), str)
