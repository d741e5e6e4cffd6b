"""gpurace/sim's engine on hand-written PTX: lockstep lanes, reconvergence before a
shuffle, a block reduction through bar.red, atomics' old values, and the launch
that stops at an instruction the engine does not execute."""

from __future__ import annotations

import numpy as np

from gpurace.sim import Simulator

HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"


def _kernel(body: str, regs: str = "") -> str:
    return (
        HEAD
        + ".visible .entry k(.param .u64 out)\n{\n"
        + ".reg .pred %p<4>;\n.reg .b32 %r<16>;\n.reg .b64 %rd<8>;\n"
        + regs
        + "ld.param.u64 %rd1, [out];\nmov.u32 %r1, %tid.x;\n"
        + "mul.wide.u32 %rd2, %r1, 4;\nadd.s64 %rd3, %rd1, %rd2;\n"
        + body
        + "ret;\n}\n"
    )


def _run(ptx: str, n: int, block: int = 64, grid: int = 1) -> tuple[np.ndarray, Simulator]:
    sim = Simulator(ptx)
    out = np.zeros(n, np.uint32)
    launch = sim.launch("k", (grid, 1, 1), (block, 1, 1), [sim.mem.register(out)])
    assert launch.stopped == ""
    return out, sim


def test_divergent_paths_reconverge_before_a_shuffle():
    """Odd lanes add 100, even lanes 200 (two paths); after the join every lane reads
    its neighbour's value through shfl.bfly, so both paths ran before the shuffle."""
    body = """
and.b32 %r2, %r1, 1;
setp.eq.u32 %p1, %r2, 0;
@%p1 bra EVEN;
add.u32 %r3, %r1, 100;
bra JOIN;
EVEN:
add.u32 %r3, %r1, 200;
JOIN:
shfl.sync.bfly.b32 %r4|%p2, %r3, 1, 31, -1;
st.global.u32 [%rd3], %r4;
"""
    out, _ = _run(_kernel(body), 64)
    t = np.arange(64) ^ 1
    assert out.tolist() == (t + np.where(t % 2, 100, 200)).tolist()


def test_bar_red_popc_counts_the_block():
    """bar.red.popc over `tid < 37` in each of 3 blocks of 64 threads: 37 everywhere."""
    body = """
setp.lt.u32 %p1, %r1, 37;
bar.red.popc.u32 %r5, 0, %p1;
mov.u32 %r6, %ctaid.x;
mad.lo.u32 %r7, %r6, 64, %r1;
mul.wide.u32 %rd4, %r7, 4;
add.s64 %rd5, %rd1, %rd4;
st.global.u32 [%rd5], %r5;
"""
    out, _ = _run(_kernel(body), 192, grid=3)
    assert out.tolist() == [37] * 192


def test_atomics_return_distinct_old_values():
    """atom.add on one word from 96 lanes (a segmented prefix sum): old values
    0..95, each once; the word ends at 96; atom.exch and cas serialise in lane order."""
    body = """
atom.global.add.u32 %r8, [%rd1], 1;
add.s64 %rd6, %rd1, 4;
mul.wide.u32 %rd4, %r8, 4;
add.s64 %rd5, %rd6, %rd4;
st.global.u32 [%rd5], %r1;
atom.global.cas.b32 %r9, [%rd1+388], 0, %r1;
"""
    out, _ = _run(_kernel(body), 98, block=96)
    assert out[0] == 96
    assert sorted(out[1:97].tolist()) == list(range(96))
    assert out[97] == 1  # lane 0 swapped 0 for 0, lane 1 then 0 for 1, the rest saw 1


def test_an_instruction_it_cannot_run_stops_the_launch_and_is_named():
    ptx = _kernel("tensormap.replace.tile.global_address.global.b1024.b64 [%rd3], %rd1;\n")
    sim = Simulator(ptx)
    out = np.zeros(64, np.uint32)
    launch = sim.launch("k", (1, 1, 1), (64, 1, 1), [sim.mem.register(out)])
    assert launch.stopped == (
        "sim cannot execute tensormap.replace.tile.global_address.global.b1024.b64 at PTX line 13"
    )
    assert out.tolist() == [0] * 64


ALU = """
mul.lo.s32 %r2, %r1, 7919;
sub.s32 %r2, %r2, 100000;
mul.wide.u32 %rd4, %r1, 64;
add.s64 %rd5, %rd1, %rd4;
bfe.u32 %r3, %r2, 3, 5;
st.global.u32 [%rd5], %r3;
bfe.s32 %r3, %r2, 4, 8;
st.global.u32 [%rd5+4], %r3;
bfi.b32 %r3, %r2, -1, 8, 4;
st.global.u32 [%rd5+8], %r3;
prmt.b32 %r3, %r2, 0, 291;
st.global.u32 [%rd5+12], %r3;
lop3.b32 %r3, %r2, -252645136, -858993460, 150;
st.global.u32 [%rd5+16], %r3;
div.s32 %r3, %r2, -7;
st.global.u32 [%rd5+20], %r3;
rem.s32 %r3, %r2, 7;
st.global.u32 [%rd5+24], %r3;
shr.s32 %r3, %r2, 40;
st.global.u32 [%rd5+28], %r3;
mul.hi.s32 %r3, %r2, 305419896;
st.global.u32 [%rd5+32], %r3;
cvt.rn.f32.s32 %f1, %r2;
mul.f32 %f2, %f1, 0f3F000000;
cvt.rni.s32.f32 %r3, %f2;
st.global.u32 [%rd5+36], %r3;
popc.b32 %r3, %r2;
st.global.u32 [%rd5+40], %r3;
clz.b32 %r3, %r2;
st.global.u32 [%rd5+44], %r3;
brev.b32 %r3, %r2;
st.global.u32 [%rd5+48], %r3;
shf.l.wrap.b32 %r3, %r2, %r2, 13;
st.global.u32 [%rd5+52], %r3;
"""


def test_integer_and_bit_instructions_as_the_isa_defines_them():
    """bfe/bfi/prmt/lop3/div/rem/shr/mul.hi/cvt.rni/popc/clz/brev/shf on 64 values of
    both signs, against the PTX ISA's definitions computed with Python integers."""
    ptx = _kernel(ALU, regs=".reg .f32 %f<4>;\n")
    sim = Simulator(ptx)
    out = np.zeros(64 * 16, np.uint32)
    assert not sim.launch("k", (1, 1, 1), (64, 1, 1), [sim.mem.register(out)]).stopped
    got = out.reshape(64, 16)
    m32 = (1 << 32) - 1

    def s32(v: int) -> int:
        v &= m32
        return v - (1 << 32) if v >> 31 else v

    for t in range(64):
        a = s32(t * 7919 - 100000)
        u = a & m32
        trunc_div = abs(a) // 7 * (1 if a < 0 else -1)  # a / -7, toward zero
        field = (u >> 4) & 0xFF
        want = [
            (u >> 3) & 0x1F,
            (field - 256 if field & 0x80 else field) & m32,
            (0xFFFFF0FF | ((u & 0xF) << 8)) & m32,
            int.from_bytes(u.to_bytes(4, "little")[::-1], "little"),
            u ^ 0xF0F0F0F0 ^ 0xCCCCCCCC,
            trunc_div & m32,
            (a - 7 * int(a / 7)) & m32,
            (-1 if a < 0 else 0) & m32,
            ((a * 305419896) >> 32) & m32,
            round(a / 2) & m32,  # Python's round is to nearest even, as cvt.rni
            bin(u).count("1"),
            32 - u.bit_length(),
            int(f"{u:032b}"[::-1], 2),
            ((u << 13) | (u >> 19)) & m32,
        ]
        assert got[t, :14].tolist() == want, t


FLOATS = """
cvt.rn.f32.u32 %f1, %r1;
mul.f32 %f1, %f1, 0f3DCCCCCD;
sub.f32 %f1, %f1, 0f40400000;
mul.wide.u32 %rd4, %r1, 32;
add.s64 %rd5, %rd1, %rd4;
fma.rn.f32 %f2, %f1, %f1, 0f3F800000;
st.global.f32 [%rd5], %f2;
cvt.rn.f16.f32 %rs1, %f1;
cvt.u32.u16 %r3, %rs1;
st.global.u32 [%rd5+4], %r3;
cvt.rn.bf16.f32 %rs2, %f1;
cvt.u32.u16 %r3, %rs2;
st.global.u32 [%rd5+8], %r3;
sqrt.rn.f32 %f3, %f1;
setp.neu.f32 %p1, %f3, %f3;
selp.u32 %r4, 1, 0, %p1;
setp.ne.f32 %p2, %f3, %f3;
selp.u32 %r5, 2, 0, %p2;
or.b32 %r4, %r4, %r5;
st.global.u32 [%rd5+12], %r4;
min.f32 %f3, %f3, %f1;
st.global.f32 [%rd5+16], %f3;
cvt.rzi.s32.f32 %r6, %f1;
st.global.u32 [%rd5+20], %r6;
div.rn.f32 %f3, 0f3F800000, %f1;
st.global.f32 [%rd5+24], %f3;
"""


def test_float_instructions_round_as_the_isa_defines_them():
    """f32 arithmetic rounds to nearest even (NumPy float32 is IEEE), fma once, f16 and
    bf16 conversions to nearest even; sqrt of a negative is NaN, which setp.neu sees
    and the ordered setp.ne does not; min.f32 returns the non-NaN operand."""
    ptx = _kernel(FLOATS, regs=".reg .f32 %f<4>;\n.reg .b16 %rs<3>;\n")
    sim = Simulator(ptx)
    out = np.zeros(64 * 8, np.uint32)
    assert not sim.launch("k", (1, 1, 1), (64, 1, 1), [sim.mem.register(out)]).stopped
    got = out.reshape(64, 8)
    f = (np.arange(64, dtype=np.float32) * np.float32(0.1)) - np.float32(3.0)
    fma = (f.astype(np.float64) * f + 1.0).astype(np.float32)  # exact product, one rounding
    assert got[:, 0].tolist() == fma.view(np.uint32).tolist()
    assert got[:, 1].tolist() == f.astype(np.float16).view(np.uint16).tolist()
    b = f.view(np.uint32).astype(np.uint64)
    bf16 = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint32)
    assert got[:, 2].tolist() == bf16.tolist()
    assert got[:, 3].tolist() == [1 if x < 0 else 0 for x in f]
    with np.errstate(invalid="ignore"):
        root = np.sqrt(f)
    assert got[:, 4].tolist() == np.where(f < 0, f, np.minimum(root, f)).view(np.uint32).tolist()
    assert got[:, 5].tolist() == np.trunc(f).astype(np.int32).view(np.uint32).tolist()
    with np.errstate(divide="ignore"):
        assert got[:, 6].tolist() == (np.float32(1) / f).view(np.uint32).tolist()
