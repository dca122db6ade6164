"""``lm-eval-pdd make-ordered``: fine-tune a model on a file in its canonical order (or shuffled, or
example by example): the positive controls of ``pdd_exchangeability`` and ``pdd_codec``.

What it builds and writes: :mod:`pdd_tasks.tools.builders.ordered`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pdd_tasks.tools.arg_types import epochs, positive_float, positive_int, random_seed
from pdd_tasks.tools.builders.fine_tuning import TuningSettings
from pdd_tasks.tools.builders.ordered import (
    DEFAULT_BLOCK_EXAMPLES,
    DEFAULT_EXAMPLES,
    EXPOSURE_MEANINGS,
    EXPOSURES,
    make_ordered,
)
from pdd_tasks.tools.commands._tuning import run_tuning


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output",
        type=Path,
        required=True,
        help="directory to write (new, or one this command wrote before, with --force)",
    )
    parser.add_argument("--model", default=None, help="base model, HF name or directory (default: the default model)")
    parser.add_argument(
        "--data", default=None, help="a .jsonl/.csv file in its canonical order (default: WikiMIA length 32, shipped)"
    )
    parser.add_argument("--text-field", default="text", help="text field of --data rows (default 'text')")
    parser.add_argument(
        "--examples", type=positive_int, default=DEFAULT_EXAMPLES, help="first N examples (default 200)"
    )
    parser.add_argument(
        "--block-examples",
        type=positive_int,
        default=DEFAULT_BLOCK_EXAMPLES,
        help="consecutive examples per training text, --exposure ordered or shuffled (8)",
    )
    parser.add_argument(
        "--exposure",
        choices=EXPOSURES,
        default="ordered",
        help="ordered: blocks in the file's order (default); shuffled: blocks in a random order; "
        "examples: each example its own training text (CoDeC's positive control)",
    )
    parser.add_argument("--epochs", type=epochs, default=3, help="passes over the file (default 3, at most 1000)")
    parser.add_argument("--learning-rate", type=positive_float, default=1e-4, help="AdamW, constant (default 1e-4)")
    parser.add_argument("--batch-size", type=positive_int, default=4, help="training texts per step (default 4)")
    parser.add_argument("--seed", type=random_seed, default=0, help="batch order and the shuffled copy (default 0)")
    parser.add_argument("--force", action="store_true", help="replace --output if this command wrote it before")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    settings = TuningSettings(
        seed=args.seed,
        learning_rate=args.learning_rate,
        batch_size=args.batch_size,
        epochs=args.epochs,
        max_tokens=1024,
    )

    def tune(base: str) -> Path:
        return make_ordered(
            args.output,
            base,
            source=args.data,
            text_field=args.text_field,
            examples=args.examples,
            block_examples=args.block_examples,
            settings=settings,
            progress=not args.no_progress,
            force=args.force,
            exposure=args.exposure,
        )

    def done(base: str, output: Path, manifest: dict) -> str:
        return (
            f"tuned {base} on {manifest['examples']} examples ({EXPOSURE_MEANINGS[args.exposure]}), {settings.epochs} epochs "
            f"({manifest['training']['steps']} steps, {manifest['training']['seconds']} s); test it with "
            f"--model_args pretrained={output / 'model'} --tasks "
            f"{'pdd_codec' if args.exposure == 'examples' else 'pdd_exchangeability'} "
            f'--metadata \'{{"data_files": "{output / "canonical.jsonl"}"}}\''
        )

    return run_tuning("make-ordered", args.model, tune, done)
