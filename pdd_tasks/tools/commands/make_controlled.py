"""``lm-eval-pdd make-controlled``: fine-tune a model on a random half of a text pool, the controlled
benchmark that ``pdd_controlled`` scores (known membership).

What it builds and writes: :mod:`pdd_tasks.tools.builders.controlled` (imported when the command
runs: it imports ``datasets``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pdd_tasks.paths import default_controlled_dir
from pdd_tasks.tools.arg_types import epochs, positive_float, positive_int, random_seed
from pdd_tasks.tools.commands._tuning import run_tuning


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output", type=Path, default=None, help="directory to write (default $LM_EVAL_PDD_HOME/controlled/default)"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace --output if this command wrote it before (never a folder with other files)",
    )
    parser.add_argument("--model", default=None, help="base model, HF name or directory (default: the default model)")
    parser.add_argument(
        "--pool",
        default="hub",
        help="'hub' (the non-members of wjfu99/WikiMIA-24), a directory holding WikiMIA_length<N>.jsonl "
        "(its non-members are used), or a .jsonl/.csv file of your own texts",
    )
    parser.add_argument(
        "--text-field", default="input", help="text field of the pool rows (default 'input', WikiMIA's)"
    )
    parser.add_argument(
        "--pool-length", type=int, default=64, choices=(32, 64, 128, 256), help="WikiMIA-24 split (default 64)"
    )
    parser.add_argument("--limit", type=positive_int, default=None, help="use only the first N pool texts (quick runs)")
    parser.add_argument(
        "--seed", type=random_seed, default=None, help="draws the member half and the batch order (default 0)"
    )
    parser.add_argument("--learning-rate", type=positive_float, default=None, help="AdamW, constant (default 1e-4)")
    parser.add_argument("--batch-size", type=positive_int, default=None, help="texts per step (default 8)")
    parser.add_argument("--epochs", type=epochs, default=None, help="passes over the members (default 1, at most 1000)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    from pdd_tasks.tools.builders.controlled import make_controlled
    from pdd_tasks.tools.builders.fine_tuning import TuningSettings

    chosen = {key: getattr(args, key) for key in ("seed", "learning_rate", "batch_size", "epochs")}
    settings = TuningSettings(**{key: value for key, value in chosen.items() if value is not None})

    def tune(base: str) -> Path:
        return make_controlled(
            args.output or default_controlled_dir(),
            base,
            pool=args.pool,
            pool_length=args.pool_length,
            text_field=args.text_field,
            settings=settings,
            limit=args.limit,
            progress=not args.no_progress,
            force=args.force,
        )

    def done(base: str, output: Path, manifest: dict) -> str:
        return (
            f"tuned {base} on {manifest['members']} of {manifest['pool_texts']} texts "
            f"({manifest['training']['steps']} steps, {manifest['training']['seconds']} s); "
            f"score it with --model_args pretrained={output / 'model'} --tasks pdd_controlled"
        )

    return run_tuning("make-controlled", args.model, tune, done)
