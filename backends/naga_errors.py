"""naga's diagnostics as gpurace's one-line, located errors.

wgpu raises `GPUValidationError` with naga's multi-line, codespan-formatted text; a
user needs the reason, at the line and column of their own file (naga counts
characters, as gpurace does), and, for a type the device lacks, which feature to ask
for. Used by `wgpu_backend` for every module it compiles.
"""

from __future__ import annotations

import re

from gpurace.model import GpuraceError

# naga's diagnostics: "Shader '' parsing error: REASON" or "Shader validation error:
# REASON", then a codespan box whose first line is "┌─ wgsl:LINE:COL", then notes
# ("= ...") and labels ("^^^ label").
_NAGA_HEAD = re.compile(r"^Shader (?:'[^']*' )?(?:parsing|validation) error: (.*)$")
_NAGA_AT = re.compile(r"┌─ [^:]*:(\d+):(\d+)")
_NAGA_NOTE = re.compile(r"^= (.*)$")
_NAGA_LABEL = re.compile(r"^\d*\s*│\s*\^+\s*(.*)$")


# naga's words for a type the device does not offer -> what the user can do
_MISSING_FEATURE = {
    "SHADER_INT64_ATOMIC": "64-bit atomics (atomic<u64>, atomic<i64>) are not supported by "
    "gpurace yet; use atomic<u32>",
    "Capabilities::SHADER_INT64`": "this device does not offer 64-bit integers (feature "
    "'shader-int64'); use u32 pairs, or pick a device that has it (gpurace devices)",
    "`f16` extension is not supported": "this device does not offer f16 (feature "
    "'shader-f16'); use f32, or pick a device that has it (gpurace devices)",
}


def naga_error(exc: Exception, path: str) -> GpuraceError:
    """naga's multi-line message as one located GpuraceError: the reason, the label
    under the position and the first note, at the position naga gives."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    reason, line, col = "", 0, 0
    extra: list[str] = []
    for ln in lines:
        head, at = _NAGA_HEAD.match(ln), _NAGA_AT.search(ln)
        note, label = _NAGA_NOTE.match(ln), _NAGA_LABEL.match(ln)
        if head and not reason:
            reason = head.group(1).strip()
        elif at and not line:
            line, col = int(at.group(1)), int(at.group(2))
        elif label and label.group(1) and len(extra) < 2:
            extra.append(label.group(1).strip())
        elif note and len(extra) < 2:
            extra.append(note.group(1).strip())
    for words, advice in _MISSING_FEATURE.items():
        if any(words in ln for ln in lines):
            return GpuraceError(advice, path, line, col)
    if not reason:  # not a naga diagnostic: the first lines as they are
        return GpuraceError(" ".join(lines[:3]) if lines else type(exc).__name__, path)
    message = reason + "".join(f" ({e})" for e in dict.fromkeys(extra) if e != reason)
    return GpuraceError(message, path, line, col)
