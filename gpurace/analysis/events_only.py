"""A log of barrier and exit events alone: what a build run logs when it stands for its
filter runs (no word may conflict: backends/prefilter.py's `filtered_run`). All the
reference analysis can find there is barrier divergence (`reference._divergence`);
`diverges` asks that with NumPy on the host, so that such a log skips the analysis
kernels unless it finds some (docs/internals.md §3). A 1M-item tree reduction logs
~41,000 such events: the kernels took ~8 ms of its 60 ms check on PoCL, this ~1 ms."""

from __future__ import annotations

import numpy as np

from gpurace.abi import (
    F_EVENT_MASK,
    F_EVENT_SHIFT,
    F_KIND_MASK,
    RECORD_WORDS,
    W_EPOCH,
    W_FLAGS,
    W_GROUP,
    W_SITE,
)
from gpurace.model import Event, Kind

#: the most records the host reads back to test (64 MiB of log): a longer events-only
#: log (a launch of very many groups and barriers) stays on the device, where the
#: analysis kernels decide it without a host copy of the log and its sort keys
HOST_RECORDS_MAX = 1 << 21


def diverges(records: np.ndarray, lo: int, hi: int) -> bool | None:
    """Whether the reference finds barrier divergence among the events of work-groups
    [lo, hi) of `records` (an (n, 8) u32 log): two barrier sites at one (group,
    ordinal), or an exit at an ordinal where its group has a barrier event. None when
    a record is not a barrier or exit event (an access, an ORDER event): the analysis
    kernels decide that log."""
    recs = np.asarray(records, np.uint32).reshape(-1, RECORD_WORDS)
    flags = recs[:, W_FLAGS]
    code = (flags >> F_EVENT_SHIFT) & F_EVENT_MASK
    if ((flags & F_KIND_MASK) != Kind.EVENT).any() or (code > Event.EXIT).any():
        return None
    group = recs[:, W_GROUP].astype(np.uint64)
    key = (group << np.uint64(32)) | recs[:, W_EPOCH]  # (group, ordinal)
    mine = (group >= lo) & (group < hi)
    barrier = mine & (code == Event.BARRIER)
    bkey = key[barrier]
    order = np.argsort(bkey)  # sites differ within a run of equal keys iff two adjacent do
    bkey, bsite = bkey[order], recs[barrier, W_SITE][order]
    if ((bkey[1:] == bkey[:-1]) & (bsite[1:] != bsite[:-1])).any():
        return True
    ekey = key[mine & (code == Event.EXIT)]
    if not len(bkey) or not len(ekey):
        return False
    at = np.minimum(np.searchsorted(bkey, ekey), len(bkey) - 1)
    return bool((bkey[at] == ekey).any())
