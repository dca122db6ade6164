"""A model that has seen a benchmark file, in one of three exposures (built by ``lm-eval-pdd make-ordered``).

The positive controls of the contamination tests. :func:`make_ordered` fine-tunes a causal LM (by default the default
model) for a few epochs on the first N examples of a file; ``--exposure`` says how the file is seen
(:func:`training_texts`):

- ``ordered`` (default; the positive control of ``pdd_exchangeability``, Oren et al., ICLR 2024):
  **in the file's order**, the way a pretraining corpus that contains the file packs it: consecutive
  examples joined by the task's separator (``"\\n"``) into blocks of ``--block-examples`` examples,
  each block one training text. The order *inside* a block is the canonical one, so the model can
  learn which example follows which;
- ``shuffled``: the same blocks, packed from the examples in a random order (``--seed``): the file
  seen, its order not;
- ``examples`` (the positive control of ``pdd_codec``; how the CoDeC authors' notebook contaminates a
  model): each example its own training text, encoded as its tokenizer encodes it: after the start
  token where the tokenizer adds one (Llama's BOS), after nothing where it adds none (GPT-2,
  SmolLM2), as CoDeC's requests score it (lm-eval encodes a request's context with the tokenizer's
  own special tokens).

A block (``ordered``, ``shuffled``) follows the model's start token (BOS, else EOS: the token
lm-eval's HF backend scores a whole text after, as the exchangeability test does). The batch order of
the training texts is drawn again every epoch; the manifest says which start token, if any.

It writes ``<output>/model`` (the tuned model and tokenizer), ``canonical.jsonl`` (the N examples in
the file's order: the contaminated benchmark), ``shuffled.jsonl`` (the same examples in a random
order: the negative control of the exchangeability test, an order the model never saw),
``training.jsonl`` (the training texts, one a line, as the fine-tuning read them after the start
token) and ``manifest.json``. Then:

    lm_eval --model hf --model_args pretrained=<output>/model,dtype=float32 \\
      --include_path "$(lm-eval-pdd tasks-path)" --tasks pdd_exchangeability \\
      --metadata '{"data_files": "<output>/canonical.jsonl", "num_shards": 10, "permutations": 20}'

Default source: the 776 texts of WikiMIA length 32 shipped with the package (field ``input``), in
their file order.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict
from pathlib import Path

from pdd_tasks.errors import excerpt
from pdd_tasks.loading.benchmark_data import PACKAGED_DATA, DatasetError, read_local_rows
from pdd_tasks.tools.builders.fine_tuning import TuningSettings, start_token_id, tuned_copy
from pdd_tasks.tools.outputs import check_output_folder, replace_folder


DEFAULT_SOURCE = "WikiMIA_length32 (shipped)"
DEFAULT_EXAMPLES = 200
DEFAULT_BLOCK_EXAMPLES = 8

#: ``--exposure``: how the fine-tuning sees the file (:func:`training_texts`).
EXPOSURES = ("ordered", "shuffled", "examples")
EXPOSURE_MEANINGS = {
    "ordered": "blocks of consecutive examples in the file's order (a copy of the file in the corpus)",
    "shuffled": "blocks of examples in a random order (the file seen, its order not)",
    "examples": "each example its own training text, in random batch order (the CoDeC authors' notebook)",
}


def training_texts(texts: list[str], exposure: str, block_examples: int, separator: str, seed: int) -> list[str]:
    """The training texts of ``texts`` for ``exposure`` (:data:`EXPOSURES`): blocks of ``block_examples``
    examples joined by ``separator`` in the file's order (``ordered``) or in an order drawn with ``seed``
    (``shuffled``), or each example alone (``examples``).

    >>> training_texts(["a", "b", "c"], "ordered", 2, "\\n", 0), training_texts(["a", "b", "c"], "examples", 2, "\\n", 0)
    (['a\\nb', 'c'], ['a', 'b', 'c'])
    """
    if exposure not in EXPOSURES:
        raise ValueError(f"exposure must be one of {EXPOSURES}, got {exposure!r}")
    if exposure == "examples":
        return list(texts)
    order = list(texts)
    if exposure == "shuffled":
        random.Random(seed).shuffle(order)
    return [separator.join(order[i : i + block_examples]) for i in range(0, len(order), block_examples)]


def load_examples(source: str | None, text_field: str, limit: int) -> tuple[list[str], str]:
    """The first ``limit`` examples of ``source`` (a .jsonl/.csv file) in file order, or of the
    shipped WikiMIA length-32 file when ``source`` is None."""
    if source is None:
        path, text_field, description = PACKAGED_DATA / "wikimia" / "WikiMIA_length32.jsonl", "input", DEFAULT_SOURCE
    else:
        path, description = Path(source).expanduser(), str(source)
    rows = read_local_rows(path)
    for index, row in enumerate(rows[:limit]):
        if not isinstance(row.get(text_field), str) or not row[text_field].strip():
            raise DatasetError(
                f"{description}, row {index}: no text in field {text_field!r} (fields: {excerpt(sorted(row))}); "
                "name the field with --text-field."
            )
    examples = [row[text_field] for row in rows[:limit]]
    if len(examples) < 4:
        raise DatasetError(f"{description}: {len(examples)} examples; the test needs at least 4 (2 shards of 2).")
    return examples, description


def make_ordered(
    output_dir: Path,
    base_model: str | Path,
    source: str | None = None,
    text_field: str = "text",
    examples: int = DEFAULT_EXAMPLES,
    block_examples: int = DEFAULT_BLOCK_EXAMPLES,
    separator: str = "\n",
    settings=None,
    exposure: str = "ordered",
    progress: bool = True,
    force: bool = False,
) -> Path:
    """Fine-tune ``base_model`` on the first ``examples`` examples of ``source`` as ``exposure`` says
    (:func:`training_texts`); write ``output_dir`` atomically (``force``: replace a folder this command wrote before,
    :func:`pdd_tasks.tools.outputs.replace_folder`)."""

    settings = settings or TuningSettings(epochs=3, learning_rate=1e-4, batch_size=4, max_tokens=512)
    inputs = (source, base_model)
    check_output_folder(output_dir, force=force, command="make-ordered", inputs=inputs)
    texts, description = load_examples(source, text_field, examples)
    blocks = training_texts(texts, exposure, block_examples, separator, settings.seed)
    start = "tokenizer" if exposure == "examples" else "always"
    model, tokenizer, stats = tuned_copy(base_model, blocks, settings, progress=progress, start=start)
    if start == "always":
        start_id = start_token_id(tokenizer)
    else:  # what the tokenizer puts before a text, if anything
        added = tokenizer("x").input_ids[: -len(tokenizer("x", add_special_tokens=False).input_ids)]
        start_id = added[0] if added else None
    start_token = {"id": start_id, "text": None if start_id is None else tokenizer.convert_ids_to_tokens(start_id)}

    with replace_folder(output_dir, force=force, command="make-ordered", inputs=inputs) as tmp:
        model.save_pretrained(tmp / "model")
        tokenizer.save_pretrained(tmp / "model")
        shuffled = list(texts)
        random.Random(settings.seed + 1).shuffle(shuffled)
        for name, rows in (("canonical.jsonl", texts), ("shuffled.jsonl", shuffled), ("training.jsonl", blocks)):
            with open(tmp / name, "w", encoding="utf-8") as handle:
                handle.writelines(json.dumps({"text": text}, ensure_ascii=False) + "\n" for text in rows)
        manifest = {
            "base_model": str(base_model),
            "source": description,
            "examples": len(texts),
            "exposure": exposure,
            "exposure_means": EXPOSURE_MEANINGS[exposure],
            "block_examples": 1 if exposure == "examples" else block_examples,
            "blocks": len(blocks),
            "start_token": start_token | {"how": "always" if start == "always" else "as the tokenizer adds it"},
            "separator": separator,
            "settings": asdict(settings),
            "training": stats,
            "what_it_is": f"a positive control of the contamination tests: tuned on canonical.jsonl as {exposure}",
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return output_dir
