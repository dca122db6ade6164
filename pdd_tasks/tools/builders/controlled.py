"""The controlled benchmark that ``pdd_controlled`` scores (built by ``lm-eval-pdd make-controlled``).

:func:`make_controlled` fine-tunes a causal LM (the command's default: the default model) for one epoch
on a random half of a pool of texts that postdate it (by default the non-members of WikiMIA-24,
events of March to December 2024), and saves the tuned model with a labelled dataset: the texts it
was tuned on are members (1), the other half non-members (0). ``pdd_controlled`` scores that dataset;
run it with the tuned model (``pretrained=<dir>/model``).

This measures **fine-tuning** membership, which is easier to detect than pretraining membership
(the texts were seen recently, in one short epoch, by a small model). Because the halves are drawn
at random from one pool, whatever the base model saw of these texts before is the same on both
sides: the only difference between members and non-members is the fine-tuning.
"""

from __future__ import annotations

import json
import logging
import random
from dataclasses import asdict
from pathlib import Path

import datasets

from pdd_tasks.loading.benchmark_data import check_texts
from pdd_tasks.loading.files import DatasetError, read_jsonl, read_rows
from pdd_tasks.tools.builders.fine_tuning import TuningSettings, tuned_copy
from pdd_tasks.tools.outputs import check_output_folder, replace_folder


logger = logging.getLogger(__name__)

POOL_HUB_ID = "wjfu99/WikiMIA-24"
DEFAULT_POOL_LENGTH = 64
MIN_POOL = 4  # two members and two non-members


def load_pool(source: str, length: int = DEFAULT_POOL_LENGTH, text_field: str = "input") -> tuple[list[str], str]:
    """Texts of the pool and a description of where they came from.

    ``source``: ``"hub"`` (the non-members, label 0, of ``wjfu99/WikiMIA-24``'s
    ``WikiMIA_length<length>`` split), a directory holding ``WikiMIA_length<length>.jsonl`` in that
    schema (same filter), or a ``.jsonl``/``.csv`` file whose every row is a pool text (no filter).
    """
    split = f"WikiMIA_length{length}"
    path = Path(source).expanduser().resolve()
    if source == "hub":
        try:
            rows = datasets.load_dataset(POOL_HUB_ID, split=split).to_list()
        except Exception as error:  # network or hub errors: say what to do instead
            raise DatasetError(
                f"Could not load the pool {POOL_HUB_ID} split {split} from the Hugging Face Hub "
                f"({type(error).__name__}: {error}). Offline, pass --pool <dir> with {split}.jsonl "
                f"(a local copy of WikiMIA-24) or --pool <file.jsonl> with your own texts."
            ) from error
        description = f"{POOL_HUB_ID}:{split} non-members (label 0)"
    elif path.is_dir():
        file = path / f"{split}.jsonl"
        if not file.is_file():
            raise DatasetError(f"--pool {source}: expected {file} (WikiMIA-24's {split} as JSONL).")
        rows = read_jsonl(file)
        description = f"{file} non-members (label 0)"
    elif path.is_file():
        rows = read_rows(path)
        description = str(path)
    else:
        raise DatasetError(f"--pool {source!r}: not 'hub', a directory or a file.")
    if source == "hub" or path.is_dir():
        rows = [row for row in rows if row.get("label") == 0]
    unique = list(dict.fromkeys(check_texts(rows, description, text_field)))
    if len(unique) < MIN_POOL:
        raise DatasetError(
            f"{description}: {len(unique)} distinct texts; the pool needs at least {MIN_POOL} (two per class)."
        )
    return unique, description


def split_pool(texts: list[str], seed: int) -> tuple[list[str], list[str]]:
    """A random half (members, tuned on) and the rest (non-members); sizes differ by at most 1."""
    order = list(range(len(texts)))
    random.Random(seed).shuffle(order)
    half = len(texts) // 2
    return [texts[i] for i in order[:half]], [texts[i] for i in order[half:]]


def make_controlled(
    output_dir: Path,
    base_model: str | Path,
    pool: str = "hub",
    pool_length: int = DEFAULT_POOL_LENGTH,
    text_field: str = "input",
    settings: TuningSettings = TuningSettings(),
    limit: int | None = None,
    progress: bool = True,
    force: bool = False,
) -> Path:
    """Fine-tune ``base_model`` on a random half of the pool; write ``output_dir`` atomically.

    ``output_dir`` receives ``model/`` (the tuned model and its tokenizer, loadable with
    ``--model hf --model_args pretrained=<output_dir>/model``), ``data.jsonl`` (``text``, ``label``:
    1 = tuned on) and ``manifest.json`` (everything needed to redo it).
    """

    output_dir = Path(output_dir)
    inputs = (pool, base_model)
    check_output_folder(output_dir, force=force, command="make-controlled", inputs=inputs)
    texts, description = load_pool(pool, pool_length, text_field)
    if limit is not None:
        texts = texts[:limit]
        if len(texts) < MIN_POOL:
            raise DatasetError(
                f"--limit {limit}: {len(texts)} texts; the pool needs at least {MIN_POOL} (two members and two "
                f"non-members). Pass --limit {MIN_POOL} or more."
            )
    members, non_members = split_pool(texts, settings.seed)
    model, tokenizer, stats = tuned_copy(base_model, members, settings, progress=progress)

    with replace_folder(output_dir, force=force, command="make-controlled", inputs=inputs) as tmp:
        model.save_pretrained(tmp / "model")
        tokenizer.save_pretrained(tmp / "model")
        rows = [{"text": t, "label": 1} for t in members] + [{"text": t, "label": 0} for t in non_members]
        random.Random(settings.seed + 1).shuffle(rows)
        with open(tmp / "data.jsonl", "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        manifest = {
            "base_model": str(base_model),
            "pool": description,
            "pool_limit": limit,
            "pool_texts": len(texts),
            "members": len(members),
            "non_members": len(non_members),
            "settings": asdict(settings),
            "training": stats,
            "what_it_measures": "fine-tuning membership (1 epoch), easier than pretraining membership",
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return output_dir
