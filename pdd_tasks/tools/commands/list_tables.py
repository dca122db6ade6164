"""``lm-eval-pdd list-tables``: the installed frequency tables and the shipped fallback."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    from pdd_tasks.freq.tables import FrequencyTable, FrequencyTableError, default_table_path, table_cache_dir

    directory = table_cache_dir()
    lines = [f"installed tables (used for a model whose tokenizer fingerprint is the file name): {directory}"]
    found = sorted(directory.glob("*.npz")) if directory.is_dir() else []
    for path in found:
        try:
            lines.append(f"  {path.name}: {FrequencyTable.load(path).description}")
        except FrequencyTableError as exc:
            lines.append(f"  {path.name}: UNREADABLE ({exc})")
    if not found:
        lines.append("  (none; install one with `lm-eval-pdd build-table ... --install` or `install-table`)")
    shipped = default_table_path()
    lines.append(f"fallback (shipped, for the default model's tokenizer): {shipped}")
    lines.append(f"  {FrequencyTable.load(shipped).description}")
    print("\n".join(lines))
    return 0
