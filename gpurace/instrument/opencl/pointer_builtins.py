"""Data: the OpenCL C built-in functions that take a pointer argument, and what the
rewriter does with each.

Source: The OpenCL C Specification, version 3.0 (Khronos OpenCL Working Group),
§6.15 "Built-in Functions": §6.15.3 math functions, §6.15.11 vector data load and
store, §6.15.13 address space qualifier functions, §6.15.14 async copies and
prefetch, §6.15.15 atomic functions, §6.15.16 legacy atomics (and the
cl_khr_*_atomics `atom_*` forms, §6.15.16 / extension spec §9), §6.15.18 printf,
§6.15.21 pipes, §6.15.22 enqueuing kernels; plus the pointer-taking functions of the
extensions clang's `opencl-c.h` declares (cl_intel_subgroups block reads/writes).
tests/test_opencl_constructs.py checks this table against every function with a
pointer parameter that clang's header declares, and the rewriter's dispatch
(`builtins.family`) against this table.

Treatments:
- "out": writes its last argument (a value of the pointee type) - logged as a store;
- "vload" / "vstore": reads / writes n elements at `p + offset * n`;
- "async": an async work-group copy (a load of the source, a store of the destination);
- "atomic": an atomic access of its first argument;
- "sync": a barrier-like work-group function whose pointer is private (the events);
- "none": takes a pointer but accesses no memory through it (a hint, an address
  space cast, printf's __constant format string);
- "listed": accesses memory the rewriter does not model: listed in not_instrumented.
"""

from __future__ import annotations

_N = ("", "2", "3", "4", "8", "16")
_ROUND = ("", "_rte", "_rtz", "_rtp", "_rtn")
_C11 = (
    "atomic_init atomic_store atomic_load atomic_exchange atomic_compare_exchange_strong "
    "atomic_compare_exchange_weak atomic_fetch_add atomic_fetch_sub atomic_fetch_or "
    "atomic_fetch_xor atomic_fetch_and atomic_fetch_min atomic_fetch_max "
    "atomic_flag_test_and_set atomic_flag_clear"
).split()
_LEGACY = "add sub xchg inc dec cmpxchg min max and or xor".split()
_INTEL = [
    f"intel_sub_group_block_{rw}{t}{n}"
    for rw in ("read", "write")
    for t in ("", "_ui", "_us")
    for n in ("", "2", "4", "8")
]

#: (specification section, names, treatment)
POINTER_BUILTINS: list[tuple[str, list[str], str]] = [
    ("6.15.3 math", ["fract", "frexp", "lgamma_r", "modf", "remquo", "sincos"], "out"),
    ("6.15.11 vector load", [f"vload{n}" for n in _N], "vload"),
    ("6.15.11 vector load", [f"vload_half{n}" for n in _N], "vload"),
    ("6.15.11 vector load", [f"vloada_half{n}" for n in _N[1:]], "vload"),
    ("6.15.11 vector store", [f"vstore{n}" for n in _N], "vstore"),
    ("6.15.11 vector store", [f"vstore_half{n}{r}" for n in _N for r in _ROUND], "vstore"),
    ("6.15.11 vector store", [f"vstorea_half{n}{r}" for n in _N[1:] for r in _ROUND], "vstore"),
    ("6.15.13 address space", ["to_global", "to_local", "to_private", "get_fence"], "none"),
    ("6.15.14 async copy", ["async_work_group_copy", "async_work_group_strided_copy"], "async"),
    ("6.15.14 async copy", ["wait_group_events"], "sync"),
    ("6.15.14 prefetch", ["prefetch"], "none"),
    ("6.15.15 atomics", _C11 + [f"{n}_explicit" for n in _C11 if n != "atomic_init"], "atomic"),
    ("6.15.16 legacy atomics", [f"atomic_{op}" for op in _LEGACY], "atomic"),
    ("6.15.16 legacy atomics", [f"atom_{op}" for op in _LEGACY], "atomic"),
    ("6.15.18 printf", ["printf"], "none"),
    ("6.15.21 pipes", ["read_pipe", "write_pipe"], "listed"),
    (
        "6.15.22 enqueue",
        ["enqueue_kernel", "enqueue_marker", "capture_event_profiling_info"],
        "listed",
    ),
    ("cl_intel_subgroups", _INTEL, "listed"),
]


def treatments() -> dict[str, str]:
    """Each pointer-taking built-in's name -> its treatment."""
    return {name: how for _, names, how in POINTER_BUILTINS for name in names}
