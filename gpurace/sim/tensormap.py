"""The sim device's tensor maps: what ``cp.async.bulk.tensor`` (TMA) reads to know its box.

On a GPU a tensor map (``CUtensorMap``) is a 128-byte object, 64-byte aligned, that the
driver's ``cuTensorMapEncodeTiled`` writes; its layout is not documented. On sim gpurace
*is* the driver, so it defines its own layout, written by `encode_tiled` (whose arguments
mirror ``cuTensorMapEncodeTiled``'s) and read by the simulator (gpurace/sim/tma.py) and by
the PTX rewriter's records (gpurace/instrument/ptx/tma.py). All little-endian:

=======  ========  =======================================================================
offset   type      field
=======  ========  =======================================================================
0        u32       `MAGIC` ("GRTM"): a map of another layout (a GPU's) is not read
4        u8        rank, 1 to 5
5        u8        element size in bytes (1, 2, 4, 8)
6        u8        interleave (0: none; others are not modelled)
7        u8        swizzle (0: none; others are not modelled)
8        u64       global address of the tensor's first element
16       u32 x 5   dims, in elements (dim 0 is the contiguous one; unused ranks 1)
36       u8        out-of-bound fill (0: zeros; 1, NaN, is not modelled)
37       u8        L2 promotion (kept, no effect)
38       u16       the data type as given (CUtensorMapDataType's number)
40       u64 x 4   global strides of dims 1..4 in bytes (dim 0's is the element size)
72       u16 x 5   box dims, in elements (unused ranks 1)
82       u8 x 5    element strides (1: every element; others are not modelled)
=======  ========  =======================================================================

The rest is zero. A box is laid out in shared memory densely, dim 0 fastest.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

MAGIC = 0x4D545247  # b"GRTM", little-endian
SIZE = 128
OFF_RANK, OFF_ESIZE, OFF_INTERLEAVE, OFF_SWIZZLE, OFF_BASE = 0x4, 0x5, 0x6, 0x7, 0x8
OFF_DIMS, OFF_FILL, OFF_STRIDES, OFF_BOX, OFF_ESTRIDES = 16, 36, 40, 72, 82

#: CUtensorMapDataType -> element bytes (cuda.h's numbering)
DATA_TYPES = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4}
#: launch-file names of the element types (CU_TENSOR_MAP_DATA_TYPE_...)
TYPE_NAMES = {
    "uint8": 0, "uint16": 1, "uint32": 2, "int32": 3, "uint64": 4, "int64": 5,
    "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9, "float32_ftz": 10,
    "tfloat32": 11, "tfloat32_ftz": 12,
}  # fmt: skip


class TensorMapError(ValueError):
    """Arguments cuTensorMapEncodeTiled would refuse (CUDA_ERROR_INVALID_VALUE)."""


@dataclass(frozen=True)
class TensorMap:
    """A decoded map (sim's layout)."""

    rank: int
    esize: int
    base: int
    dims: tuple[int, ...]
    strides: tuple[int, ...]  # bytes, dims 0..rank-1 (dim 0's: the element size)
    box: tuple[int, ...]
    estrides: tuple[int, ...]
    interleave: int = 0
    swizzle: int = 0
    fill: int = 0
    dtype: int = 7

    def unmodelled(self) -> str:
        """Why a copy through this map is not modelled ("" where it is)."""
        if self.interleave:
            return f"an interleaved tensor map (interleave {self.interleave})"
        if self.swizzle:
            return f"a swizzled tensor map (swizzle {self.swizzle})"
        if any(e != 1 for e in self.estrides):
            return f"a tensor map with element strides {list(self.estrides)}"
        if self.fill:
            return "a tensor map whose out-of-bound elements are NaN"
        return ""

    @property
    def box_bytes(self) -> int:
        n = self.esize
        for b in self.box:
            n *= b
        return n


def encode_tiled(
    dtype: int | str,
    rank: int,
    global_address: int,
    global_dim: Sequence[int],
    global_strides: Sequence[int],
    box_dim: Sequence[int],
    element_strides: Sequence[int] | None = None,
    interleave: int = 0,
    swizzle: int = 0,
    l2_promotion: int = 0,
    oob_fill: int = 0,
) -> bytes:
    """The 128 bytes of a tiled map in sim's layout, from cuTensorMapEncodeTiled's
    arguments: `global_strides` are the rank - 1 strides of dims 1.. in bytes (each a
    multiple of 16), `box_dim` at most 256 each with box_dim[0] * element size a
    multiple of 16 bytes. Map kinds sim does not model (swizzle, interleave, element
    strides, NaN fill) are encoded as asked: a copy through them is listed, not made."""
    code = TYPE_NAMES[dtype] if isinstance(dtype, str) else int(dtype)
    if code not in DATA_TYPES:
        raise TensorMapError(f"unknown tensor data type {dtype!r}")
    esize = DATA_TYPES[code]
    estr = list(element_strides) if element_strides is not None else [1] * rank
    if not 1 <= rank <= 5:
        raise TensorMapError(f"rank {rank} (1 to 5)")
    for name, seq, n in (("global_dim", global_dim, rank), ("box_dim", box_dim, rank),
                         ("global_strides", global_strides, rank - 1),
                         ("element_strides", estr, rank)):  # fmt: skip
        if len(seq) != n:
            raise TensorMapError(f"{name} has {len(seq)} values, not {n} (rank {rank})")
    if global_address % 16:
        raise TensorMapError(f"global address {global_address:#x} is not 16-byte aligned")
    if any(not 1 <= d < 1 << 32 for d in global_dim):
        raise TensorMapError(f"global_dim {list(global_dim)}: each 1 to 2^32 - 1")
    if any(s % 16 or not 0 < s < 1 << 40 for s in global_strides):
        raise TensorMapError(f"global_strides {list(global_strides)}: multiples of 16 below 2^40")
    if any(not 1 <= b <= 256 for b in box_dim):
        raise TensorMapError(f"box_dim {list(box_dim)}: each 1 to 256")
    if box_dim[0] * esize % 16:
        raise TensorMapError(
            f"box_dim[0] {box_dim[0]} x {esize} bytes is not a multiple of 16 bytes"
        )
    if any(not 1 <= e <= 8 for e in estr):
        raise TensorMapError(f"element_strides {estr}: each 1 to 8")
    pad = 5 - rank
    out = bytearray(SIZE)
    struct.pack_into("<IBBBBQ", out, 0, MAGIC, rank, esize, interleave, swizzle, global_address)
    struct.pack_into("<5I", out, OFF_DIMS, *global_dim, *[1] * pad)
    struct.pack_into("<BBH", out, OFF_FILL, oob_fill, l2_promotion, code)
    struct.pack_into("<4Q", out, OFF_STRIDES, *global_strides, *[0] * (4 - (rank - 1)))
    struct.pack_into("<5H", out, OFF_BOX, *box_dim, *[1] * pad)
    struct.pack_into("<5B", out, OFF_ESTRIDES, *estr, *[1] * pad)
    return bytes(out)


def decode(raw: bytes) -> TensorMap | None:
    """The map in `raw` (128 bytes), or None if they are not in sim's layout."""
    if len(raw) < SIZE:
        return None
    magic, rank, esize, inter, swz, base = struct.unpack_from("<IBBBBQ", raw, 0)
    if magic != MAGIC or not 1 <= rank <= 5:
        return None
    dims = struct.unpack_from("<5I", raw, OFF_DIMS)[:rank]
    fill, _, dtype = struct.unpack_from("<BBH", raw, OFF_FILL)
    strides = (esize, *struct.unpack_from("<4Q", raw, OFF_STRIDES)[: rank - 1])
    box = struct.unpack_from("<5H", raw, OFF_BOX)[:rank]
    estr = struct.unpack_from("<5B", raw, OFF_ESTRIDES)[:rank]
    return TensorMap(rank, esize, base, dims, strides, box, estr, inter, swz, fill, dtype)


#: a buffer's element dtype -> its CUtensorMapDataType (8- and 16-bit integers as the
#: unsigned types of their size: a copy moves bytes)
_BY_DTYPE = {"u1": 0, "i1": 0, "u2": 1, "i2": 1, "u4": 2, "i4": 3, "u8": 4, "i8": 5,
             "f2": 6, "f4": 7, "f8": 8}  # fmt: skip


@dataclass(frozen=True)
class TiledMap:
    """A kernel argument that is a tiled tensor map of another argument's buffer
    (a launch file's ``tensormap`` table): encoded when the launch knows the buffer's
    address (`encode`, sim's SimKernel), as a host calls cuTensorMapEncodeTiled."""

    tensor: int  # the [[arg]] index of the buffer
    dtype: int
    dims: tuple[int, ...]
    strides: tuple[int, ...]  # bytes, dims 1..
    box: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: int = 0
    swizzle: int = 0
    oob_fill: int = 0

    def encode(self, base: int) -> bytes:
        return encode_tiled(self.dtype, len(self.dims), base, self.dims, self.strides,
                            self.box, self.element_strides, self.interleave, self.swizzle,
                            0, self.oob_fill)  # fmt: skip

    def extent(self) -> int:
        """Bytes of the buffer the tensor spans (its last element's end)."""
        es = DATA_TYPES[self.dtype]
        return es + sum((d - 1) * s for d, s in zip(self.dims, (es, *self.strides), strict=True))


def dtype_code(dtype: str, typ: str) -> int | None:
    """The data type of a buffer of NumPy dtype string `dtype` ("<f4") and launch-file
    type `typ` (bf16 is stored as 16 bits)."""
    if typ.startswith(("bf16", "__nv_bfloat16")):
        return 9
    return _BY_DTYPE.get(dtype.lstrip("<>|="))
