"""The demo's dtype choice: bfloat16 only where the CPU computes it natively."""

from __future__ import annotations

import subprocess
import sys

from pdd_tasks.tools.cpu_dtype import choose_dtype, cpu_flags


def test_native_bfloat16_flags_choose_bfloat16_and_say_why():
    for flags in ({"avx512f", "avx512_bf16"}, {"amx_tile", "amx_bf16"}):
        dtype, reason = choose_dtype(flags)
        assert dtype == "bfloat16"
        assert "natively" in reason and "Spearman >= 0.994" in reason


def test_without_native_bfloat16_float32_stays():
    for flags in (set(), {"avx2", "avx512f", "amx_tile"}):
        dtype, reason = choose_dtype(flags)
        assert dtype == "float32"
        assert "no native bfloat16" in reason


def test_cpu_flags_read_from_a_cpuinfo_file(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx512_bf16\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert cpu_flags(cpuinfo) == {"fpu", "sse2", "avx512_bf16"}


def test_cli_prints_the_dtype_alone_on_stdout_and_the_reason_on_stderr():
    process = subprocess.run(
        [sys.executable, "-m", "pdd_tasks.tools.cli", "cpu-dtype"], capture_output=True, text=True, check=True
    )
    assert process.stdout == f"{choose_dtype(cpu_flags())[0]}\n"
    assert process.stderr.startswith("model dtype ")
