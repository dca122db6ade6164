"""What the bad-input tests share (and the tests of other folders that check a refusal): rows and
JSONL files of texts, a ``pdd_custom`` run through the real ``lm_eval``, the ``lm-eval-pdd`` command
line, and the check that a command refused with a message (no traceback) naming the problem and the fix."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from .harness import cpu_float32, harness_args, run_lm_eval, run_lm_eval_pdd, wikimia_rows


def rows(*pairs):
    return [{"text": text, "label": label} for text, label in pairs]


def lm_eval_custom(model_dir, data, out, metadata, check=True, extra=(), task="pdd_custom"):
    """The real ``lm_eval`` on ``task`` with ``data`` (a path, a list of paths or None) as data_files."""
    out.parent.mkdir(parents=True, exist_ok=True)
    files = {} if data is None else {"data_files": [str(d) for d in data] if isinstance(data, list) else str(data)}
    args = harness_args(
        cpu_float32(model_dir), task, out, device="cpu", batch_size=4, metadata={**files, **metadata}, log_samples=False
    )
    return run_lm_eval([*extra, *args], cwd=out.parent, check=check)


def write_jsonl(path, items):
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path


def run_pdd(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """The ``lm-eval-pdd`` command line (its entry point, in this process)."""
    return run_lm_eval_pdd(args, cwd)


def assert_refused(process: subprocess.CompletedProcess, *fragments: str) -> None:
    """Exit status 1, no traceback, and every fragment (the problem, the fix) in the message."""
    assert process.returncode != 0, process.stderr[-3000:]
    assert "Traceback" not in process.stderr, process.stderr[-3000:]
    for fragment in fragments:
        assert fragment in process.stderr, f"{fragment!r} not in:\n{process.stderr[-3000:]}"


MEMBERS = [row["input"] for row in wikimia_rows(32) if row["label"] == 1][:6]
NON_MEMBERS = [row["input"] for row in wikimia_rows(32) if row["label"] == 0][:6]
