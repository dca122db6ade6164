"""What the fine-tuning commands share (``make-controlled``, ``make-ordered``): their command line
around a builder of :mod:`pdd_tasks.tools.builders`."""

from __future__ import annotations

import contextlib
import json
import sys

from pdd_tasks.loading.files import DatasetError
from pdd_tasks.tools.outputs import OutputRefused


def run_tuning(command: str, model: str | None, tune, done) -> int:
    """The command line of a fine-tuning command: ``tune(base)`` with stdout sent to stderr (``base``:
    ``model``, or the default model), a refusal printed as its message (exit status 1); then
    ``done(base, output, manifest)`` on stderr and the output folder on stdout."""
    from pdd_tasks.tools.builders.fine_tuning import TuningTooLong
    from pdd_tasks.tools.default_model import DefaultModelError, ensure_default_model

    try:
        with contextlib.redirect_stdout(sys.stderr):
            base = model or ensure_default_model()
            output = tune(base)
    except (DatasetError, DefaultModelError, OutputRefused, TuningTooLong) as exc:
        print(f"lm-eval-pdd {command}: {exc}", file=sys.stderr)
        return 1
    print(done(base, output, json.loads((output / "manifest.json").read_text())), file=sys.stderr)
    print(output)
    return 0
