"""The simulator's memory spaces and its vectorised loads and stores.

Global memory is a set of regions, each a NumPy byte array that callers may keep (a
region *is* the caller's array, so a kernel's writes show in it): the module's
``.global``/``.const`` variables and the launch's buffers, at addresses from
GLOBAL_BASE on. Shared memory is one byte array per block of the running batch
(static variables from SHARED_BASE, the dynamic array after them); local memory (the
``.local`` stack frames of NVRTC's ``-G`` code, the call frames) one per thread, its
addresses relative to the thread's own frame as on a GPU. Generic addresses map
shared to SHARED_WINDOW + offset and local to LOCAL_WINDOW + offset, as ``cvta``
makes them. A ``.shared::cluster`` address (``mapa``'s result) names another block of
the cluster in bits 24-31 (its rank + 1; 0 is the block itself) over the offset,
CLUSTER_SHIFT; a generic one is SHARED_WINDOW + that. Every access is checked: one
outside every allocation is a SimError naming the address, as a GPU's illegal-address fault is.
"""

from __future__ import annotations

import numpy as np

from gpurace.sim.traffic import Traffic
from gpurace.sim.values import U64, Shortcuts, SimError, uint_dtype

GLOBAL_BASE = 1 << 32
SHARED_WINDOW = 1 << 40
LOCAL_WINDOW = 1 << 44
WINDOW_SIZE = 1 << 32
SHARED_BASE = 0x100
CLUSTER_SHIFT = 24  # a shared::cluster address: (rank + 1) << CLUSTER_SHIFT | offset


class Memory:
    """Global regions (kept across launches unless transient) and the running batch's
    shared and local memory."""

    # byte counters of every Memory, off (None) unless gpurace/sim/traffic.py's
    # `counting` sets them
    traffic: Traffic | None = None

    def __init__(self) -> None:
        self.regions: list[tuple[int, np.ndarray, bool]] = []  # (addr, u8 view, transient)
        self.top = GLOBAL_BASE
        self._mark = GLOBAL_BASE  # where the transient regions start
        self._starts: np.ndarray | None = None  # the regions' addresses, for searchsorted
        self._by_buffer: dict[tuple[int, int], int] = {}  # (pointer, bytes) -> address
        self._params: dict[str, int] = {}  # kernel parameters whose address was taken
        self.shared = np.zeros(0, np.uint8)  # [blocks of the batch * shared_size]
        self.shared_size = 0
        self.local = np.zeros(0, np.uint8)  # [lanes * local_size]
        self.local_size = 0
        self.block_of = np.zeros(0, np.int64)  # lane -> its block's slot in the batch
        self.cluster = 1  # blocks per cluster; a cluster's blocks are consecutive slots

    # -- global regions -------------------------------------------------------
    def register(self, arr: np.ndarray, transient: bool = False) -> int:
        """The device address of `arr` (a contiguous array or a view into one)."""
        root = arr
        while isinstance(root.base, np.ndarray):
            root = root.base
        if not root.flags.c_contiguous:
            raise SimError("a kernel argument is not a contiguous array")
        flat = root.reshape(-1).view(np.uint8)
        base = flat.ctypes.data
        known = self._by_buffer.get((base, flat.nbytes))
        if known is not None:
            return known + (arr.ctypes.data - base)
        addr = self.top
        self.regions.append((addr, flat, transient))
        self._by_buffer[(base, flat.nbytes)] = addr
        self.top = (addr + flat.nbytes + 16 + 255) // 256 * 256
        self._starts = None
        return addr + (arr.ctypes.data - base)

    def alloc(self, data: bytes) -> int:
        """A new region holding `data` (16 bytes of slack after it, zeroed)."""
        return self.register(np.frombuffer(bytearray(data) + bytearray(16), np.uint8))

    def param_address(self, name: str, raw: np.ndarray) -> int:
        """The global address of a copy of kernel parameter `name`'s bytes `raw` (made
        at its first use in the launch): what ``mov.b64 %rd, k_param_0`` then
        ``cvta.param`` give, through which a ``__grid_constant__`` parameter (a TMA
        tensor map) is read. The kernel cannot write it (PTX: grid constants are
        read-only), so the copy stays equal to the parameter."""
        at = self._params.get(name)
        if at is None:
            data = np.frombuffer(bytearray(raw.reshape(-1).tobytes()) + bytearray(16), np.uint8)
            at = self._params[name] = self.register(data, transient=True)
        return at

    def drop_transient(self) -> None:
        """Forget the previous launch's buffers (cupy passes every launch its own)."""
        self._params = {}
        self.regions = [r for r in self.regions if not r[2]]
        self._by_buffer = {(r.ctypes.data, r.nbytes): a for a, r, _ in self.regions}
        self.top = max(
            [GLOBAL_BASE] + [(a + r.nbytes + 16 + 255) // 256 * 256 for a, r, _ in self.regions]
        )
        self._starts = None

    def read(self, addr: int, n: int) -> bytes:
        """`n` bytes of global memory at `addr` (host side)."""
        for start, region, _ in self.regions:
            if start <= addr and addr + n <= start + region.nbytes:
                return bytes(region[addr - start : addr - start + n])
        raise SimError(f"global address {addr:#x} in no allocation")

    # -- per batch --------------------------------------------------------------
    def begin_batch(self, blocks: int, shared_size: int, lanes_per_block: list[int],
                    local_size: int, cluster: int = 1) -> None:  # fmt: skip
        """Fresh shared memory for `blocks` blocks (whole clusters of `cluster`) and
        local memory for their lanes."""
        if self.traffic is not None and self.traffic.launches:
            self.traffic.launches[-1].seal()
        self.cluster = cluster
        self.shared_size = shared_size
        self.shared = np.zeros(blocks * shared_size, np.uint8)
        self.block_of = np.repeat(np.arange(blocks), lanes_per_block)
        self.local_size = local_size
        self.local = np.zeros(len(self.block_of) * local_size, np.uint8)

    # -- vectorised access --------------------------------------------------------
    def locate(
        self, space: str | None, addr: np.ndarray, lanes: np.ndarray, n: int
    ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Where each lane's `n`-byte access at `addr` lies: (byte buffer, offsets,
        which of the lanes) per buffer. `space` None: a generic address."""
        if space is None:
            out = []
            shared = (addr >= U64(SHARED_WINDOW)) & (addr < U64(SHARED_WINDOW + WINDOW_SIZE))
            local = (addr >= U64(LOCAL_WINDOW)) & (addr < U64(LOCAL_WINDOW + WINDOW_SIZE))
            glob = ~(shared | local)
            for sel, sp, window in ((glob, "global", 0), (shared, "shared", SHARED_WINDOW),
                                    (local, "local", LOCAL_WINDOW)):  # fmt: skip
                if sel.any():
                    w = np.nonzero(sel)[0]
                    for buf, off, sub in self.locate(sp, addr[w] - U64(window), lanes[w], n):
                        out.append((buf, off, w[sub]))
            return out
        every = np.arange(len(addr))
        if space == "shared":
            slots, a = self.shared_place(addr, lanes)
            self._check(a, n, self.shared_size, "shared", addr)
            return [(self.shared, slots * self.shared_size + a, every)]
        if space == "local":
            a = addr.astype(np.int64)
            self._check(a, n, self.local_size, "local", addr)
            return [(self.local, lanes * self.local_size + a, every)]
        if not len(self.regions):
            raise SimError(f"global address {int(addr[0]):#x} in no allocation")
        if self._starts is None:
            self._starts = np.array([a for a, _, _ in self.regions], U64)
        which = np.searchsorted(self._starts, addr, side="right") - 1
        out = []
        lo, hi = (int(which.min()), int(which.max())) if len(which) else (0, -1)
        one = lo == hi and Shortcuts.on  # one region: no sort, no gather
        for r in [lo] if one else np.unique(which):
            hit = every if one else np.nonzero(which == r)[0]
            at = addr if one else addr[hit]
            if r < 0:
                raise SimError(f"global address {int(at[0]):#x} in no allocation")
            start, region, _ = self.regions[int(r)]
            off = (at - U64(start)).astype(np.int64)
            self._check(off, n, region.nbytes, "global", at)
            out.append((region, off, hit))
        return out

    def shared_place(self, addr: np.ndarray, lanes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each lane's shared address as (block slot, offset): its own block's, or for a
        ``.shared::cluster`` address the cluster's block of that rank."""
        a = addr.astype(np.int64)
        slots = self.block_of[lanes]
        rank = a >> CLUSTER_SHIFT
        if not rank.any():
            return slots, a
        if ((rank > self.cluster) | (rank < 0)).any():
            at = int(addr[np.nonzero((rank > self.cluster) | (rank < 0))[0][0]])
            raise SimError(f"shared::cluster address {at:#x} names no block of the cluster")
        first = slots - slots % self.cluster
        mapped = np.where(rank > 0, first + rank - 1, slots)
        return mapped, a & ((1 << CLUSTER_SHIFT) - 1)

    @staticmethod
    def _check(off: np.ndarray, n: int, size: int, space: str, addr: np.ndarray) -> None:
        bad = (off < 0) | (off + n > size)
        if bad.any():
            at = int(addr[np.nonzero(bad)[0][0]]) if len(addr) else 0
            where = "in no allocation" if space == "global" else f"outside {space} memory"
            raise SimError(f"{space} address {at:#x} ({n} bytes) {where}")

    def load(self, space: str | None, addr: np.ndarray, lanes: np.ndarray, n: int) -> np.ndarray:
        """Each lane's `n` bytes at `addr` (n <= 8) as uint64 bits."""
        out = np.zeros(len(addr), U64)
        for buf, off, sel in self.locate(space, addr, lanes, n):
            out[sel] = gather(buf, off, n)
            if self.traffic is not None:
                self.traffic.add(self, buf, "load", off, n)
        return out

    def store(self, space: str | None, addr: np.ndarray, lanes: np.ndarray, n: int,
              bits: np.ndarray) -> None:  # fmt: skip
        """Write each lane's low `n` bytes of `bits` at `addr` (lanes in order: of two
        lanes storing to one address, the higher one's value stays)."""
        for buf, off, sel in self.locate(space, addr, lanes, n):
            scatter(buf, off, n, bits[sel])
            if self.traffic is not None:
                self.traffic.add(self, buf, "store", off, n)


def gather(buf: np.ndarray, off: np.ndarray, n: int) -> np.ndarray:
    """The `n` bytes (little-endian) at each offset of `buf`, as uint64."""
    if n == 1:
        return buf[off].astype(U64)
    if buf.nbytes % n == 0 and not (off % n).any():
        return buf.view(uint_dtype(n))[off // n].astype(U64)
    raw = np.zeros((len(off), 8), np.uint8)
    raw[:, :n] = buf[off[:, None] + np.arange(n)]
    return raw.view(U64).reshape(-1)


def scatter(buf: np.ndarray, off: np.ndarray, n: int, bits: np.ndarray) -> None:
    """Write the low `n` bytes of each of `bits` at its offset of `buf`."""
    if n == 1:
        buf[off] = bits.astype(np.uint8)
    elif buf.nbytes % n == 0 and not (off % n).any():
        buf.view(uint_dtype(n))[off // n] = bits.astype(uint_dtype(n))
    else:
        raw = np.ascontiguousarray(bits, U64).view(np.uint8).reshape(-1, 8)[:, :n]
        buf[off[:, None] + np.arange(n)] = raw
