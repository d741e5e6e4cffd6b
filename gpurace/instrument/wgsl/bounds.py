"""The WGSL rewriter's out-of-bounds records, written where the invocation exits
(docs/memcheck.md, "Cost").

An access whose index fails its bounds check is left out (the helper returns), and
it is not recorded where it happens: the invocation counts it in private variables
of its *guard key* (site, record flags, the index's depth), keeping the least index
(as a signed number, as the host reads it) and the bound beside it, and
`_gr_oflush`, called by the entry point's exit helper, writes one record per counted
access (`_gr_orec` in shaders/runtime.wgsl). The records are those the accesses
would have written, except that each carries the least index of its key's accesses
in this invocation: the host merge (`gpurace.analysis.memcheck`) counts records per
(site, variable) and shows the one with the lowest (group, local index, depth,
index), so its findings are the same (initcheck's reads are deferred alike:
initcheck.py). Why: lavapipe runs a work-group's invocations in SIMD lanes and
executes both sides of every branch under a mask, with every atomic and every store
to a storage buffer a loop over the lanes; the record's `atomicAdd` and eight
stores written inline at each guard cost every guarded access, taken or not (reduce
on lavapipe: 0.39 s of CPU of a check's kernel, against 0.16 s deferred).
"""

from __future__ import annotations


class OutOfBoundsKeys:
    """The guard keys of one module, in the order first met: key k counts in
    ``_gr_on{k}``, keeps its least index in ``_gr_oi{k}`` and that access's bound in
    ``_gr_ob{k}``."""

    def __init__(self) -> None:
        self.keys: dict[tuple[int, int, int], int] = {}

    def guard(self, site: int, flags: int, depth: int, idx: str, bound: str, leave: str) -> str:
        """The bounds check of index `idx` (u32 text) at `depth` of the access path:
        a failing one is counted in the key's private variables and `leave`s."""
        k = self.keys.setdefault((site, flags, depth), len(self.keys))
        n, i, b = f"_gr_on{k}", f"_gr_oi{k}", f"_gr_ob{k}"
        return (
            f"if {idx} >= {bound} {{ {n} += 1u; "
            f"if {n} == 1u || bitcast<i32>({idx}) < bitcast<i32>({i}) "
            f"{{ {i} = {idx}; {b} = {bound}; }} {leave} }}"
        )

    def decls(self) -> list[str]:
        """The keys' private variables and `_gr_oflush` (empty without a guard).

        `_gr_oflush` is one loop over the keys that counted an access, in key order,
        each iteration finding the next such key with a `select` per key and writing
        its records with one `_gr_orec`: an `if` per key would cost every invocation
        each key's `atomicAdd` and eight `atomicStore`s on lavapipe, which runs an
        `if`'s body under a lane mask whether or not a lane takes it (reduce's six
        keys: 0.04 s of CPU of a 0.48 s check); its loop runs once with no lane left
        when none counted one. A GPU pays a few selects per key."""
        out = []
        for k in self.keys.values():
            out += [f"var<private> _gr_on{k}: u32;", f"var<private> _gr_oi{k}: u32;"]
            out.append(f"var<private> _gr_ob{k}: u32;")
        n = len(self.keys)
        if not n:
            return [*out, "fn _gr_oflush() {\n}"]
        pick = []  # from the last key down: the least key >= k that counted is picked last
        for (site, flags, depth), k in reversed(self.keys.items()):
            pick += [
                f"    let t{k} = _gr_on{k} != 0u && {k}u >= k;",
                f"    next = select(next, {k}u, t{k});",
                f"    key = select(key, vec3<u32>({site}u, {flags}u, {depth}u), t{k});",
                f"    got = select(got, vec3<u32>(_gr_on{k}, _gr_oi{k}, _gr_ob{k}), t{k});",
            ]
        body = [
            "  var k = 0u;",
            "  loop {",
            f"    var next = {n}u;",
            "    var key = vec3<u32>();  // site, flags, depth",
            "    var got = vec3<u32>();  // count, least index, its bound",
            *pick,
            f"    if next == {n}u {{ break; }}",
            "    _gr_orec(key.x, key.y, got.x, got.y, got.z, key.z);",
            "    k = next + 1u;",
            "  }",
        ]
        return [*out, "fn _gr_oflush() {\n" + "\n".join(body) + "\n}"]
