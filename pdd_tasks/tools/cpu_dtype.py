"""Which dtype to run the default model in on this CPU: bfloat16 where the CPU computes it natively.

    lm-eval-pdd cpu-dtype        # prints bfloat16 or float32; the reason goes to stderr

A CPU with AVX512-BF16 or AMX multiplies bfloat16 matrices in hardware: the default model's forward
pass runs about 3 times faster than in float32 there, and the per-text scores keep their ranking
(Spearman >= 0.994 with float32 for every default method on the first 300 documents of
``pdd_wikimia_32``; docs/performance.md, "Precision on a CPU"). Elsewhere bfloat16 is emulated and
slower than float32, so float32 stays. The log-softmax and the statistics are taken in float32 either
way. ``.ci/demo`` uses this choice; numbers set beside published tables should come from float32.
"""

from __future__ import annotations

import platform
from collections.abc import Collection
from pathlib import Path


#: CPU flags (as /proc/cpuinfo names them) of native bfloat16 matrix arithmetic.
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")

#: The measured agreement that makes bfloat16 acceptable for a quick look (docs/performance.md).
AGREEMENT = (
    "per-text scores of every default method keep their ranking (Spearman >= 0.994 with float32, "
    "first 300 documents of pdd_wikimia_32, docs/performance.md)"
)


def choose_dtype(cpu_flags: Collection[str]) -> tuple[str, str]:
    """The dtype for the model on a CPU with ``cpu_flags``, and why.

    Returns:
        ``("bfloat16", reason)`` if any of :data:`NATIVE_BF16_FLAGS` is among the flags, else
        ``("float32", reason)``.

    >>> choose_dtype({"avx2", "avx512_bf16"})[0]
    'bfloat16'
    >>> choose_dtype({"avx2"})[0]
    'float32'
    """
    native = [name for name in NATIVE_BF16_FLAGS if name in cpu_flags]
    if native:
        return "bfloat16", f"this CPU computes bfloat16 natively ({', '.join(native)}) and {AGREEMENT}"
    return "float32", "this CPU has no native bfloat16 arithmetic (no avx512_bf16 / amx_bf16): bfloat16 would be slower"


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's feature flags: /proc/cpuinfo on Linux, else what PyTorch reports (AVX512-BF16, AMX)."""
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith(("flags", "Features")):
                return frozenset(line.split(":", 1)[1].split())
    import torch

    flags = set()
    if getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)():
        flags.add("avx512_bf16")
    if getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)():
        flags.add("amx_bf16")
    return frozenset(flags)


def describe(dtype: str, reason: str) -> str:
    return f"model dtype {dtype}: {reason} ({platform.machine()})"
