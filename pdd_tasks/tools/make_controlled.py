"""``lm-eval-pdd make-controlled``: build the controlled benchmark that ``pdd_controlled`` scores.

``lm-eval-pdd make-controlled`` fine-tunes a causal LM (by default the default model) for one epoch
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
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import datasets

from pdd_tasks.loading.benchmark_data import check_texts
from pdd_tasks.loading.files import DatasetError, read_jsonl, read_rows
from pdd_tasks.paths import default_controlled_dir
from pdd_tasks.tools.outputs import OutputRefused, check_output_folder, replace_folder


logger = logging.getLogger(__name__)

POOL_HUB_ID = "wjfu99/WikiMIA-24"
DEFAULT_POOL_LENGTH = 64
MIN_POOL = 4  # two members and two non-members


@dataclass(frozen=True)
class TuningSettings:
    """How the controlled benchmark is made (all recorded in its ``manifest.json``).

    Attributes:
        seed: draws the member half and the batch order.
        learning_rate: AdamW, constant (no warm-up or decay).
        batch_size: texts per optimisation step.
        epochs: passes over the member half (the benchmark is defined with 1).
        max_tokens: longest text in tokens (longer texts are cut, with a count in the manifest).
    """

    seed: int = 0
    learning_rate: float = 1e-4
    batch_size: int = 8
    epochs: int = 1
    max_tokens: int = 512


# -- the pool of texts ---------------------------------------------------------------------------


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


# -- fine-tuning ---------------------------------------------------------------------------------


def _start_token_id(tokenizer) -> int:
    """The token texts are scored after, as lm-eval's HF backend does: BOS, else EOS."""
    token_id = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    if token_id is None:
        raise ValueError("The tokenizer has neither a BOS nor an EOS token to score texts after.")
    return int(token_id)


def model_context(model, tokenizer, default: int) -> int:
    """The model's context in tokens: its config's ``n_positions`` / ``max_position_embeddings`` /
    ``n_ctx`` (of the text config, where nested), else the tokenizer's ``model_max_length``, else
    ``default`` (lm-eval's ``resolve_max_length``, as the HF backend resolves it)."""
    from lm_eval.models.utils import resolve_max_length

    return resolve_max_length(getattr(model, "config", None), tokenizer, default=default)


def tuned_copy(
    base_model: str | Path, texts: list[str], settings: TuningSettings, progress: bool = True, start: str = "always"
):
    """``base_model`` loaded in float32 and fine-tuned on ``texts`` (:func:`fine_tune`, ``start``); returns
    the model, its tokenizer and the training statistics (with ``seconds``)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(settings.seed)
    tokenizer = AutoTokenizer.from_pretrained(base_model)
    model = AutoModelForCausalLM.from_pretrained(base_model, dtype=torch.float32)
    began = time.perf_counter()
    stats = fine_tune(model, tokenizer, texts, settings, progress=progress, start=start)
    stats["seconds"] = round(time.perf_counter() - began, 1)
    return model, tokenizer, stats


def fine_tune(
    model, tokenizer, texts: list[str], settings: TuningSettings, progress: bool = True, start: str = "always"
) -> dict:
    """Causal-LM training on ``texts``, in place; returns statistics. ``start``: ``"always"``, each text
    after the start token (:func:`_start_token_id`, as lm-eval scores a whole text); ``"tokenizer"``,
    each text as its tokenizer encodes it, special tokens included (a start token only where the
    tokenizer adds one, as lm-eval encodes a request's context and CoDeC scores an example).

    Each training text (its start token included) is cut at ``settings.max_tokens`` or at the model's
    context (:func:`model_context`), whichever is shorter: a longer one would index past the model's
    position embeddings."""
    import torch
    from tqdm import tqdm

    if start not in ("always", "tokenizer"):
        raise ValueError(f"start must be 'always' or 'tokenizer', got {start!r}")
    start_id = _start_token_id(tokenizer)
    longest = min(settings.max_tokens, model_context(model, tokenizer, settings.max_tokens))
    encoded, cut = [], 0
    for text in texts:
        if start == "always":
            ids = [start_id] + tokenizer(text, add_special_tokens=False).input_ids
        else:
            ids = tokenizer(text).input_ids
        cut += len(ids) > longest
        encoded.append(ids[:longest])
    generator = torch.Generator().manual_seed(settings.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else start_id
    losses, tokens = [], 0
    model.train()
    steps = settings.epochs * -(-len(encoded) // settings.batch_size)
    bar = tqdm(total=steps, desc="fine-tuning", unit="step", disable=not progress)
    for _ in range(settings.epochs):
        order = torch.randperm(len(encoded), generator=generator).tolist()
        for first in range(0, len(order), settings.batch_size):
            batch = [encoded[i] for i in order[first : first + settings.batch_size]]
            width = max(map(len, batch))
            ids = torch.full((len(batch), width), pad)
            mask = torch.zeros_like(ids)
            for row, sequence in enumerate(batch):
                ids[row, : len(sequence)] = torch.tensor(sequence)
                mask[row, : len(sequence)] = 1
            labels = ids.masked_fill(mask == 0, -100)
            loss = model(
                input_ids=ids.to(model.device), attention_mask=mask.to(model.device), labels=labels.to(model.device)
            ).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
            tokens += int(mask.sum()) - len(batch)
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
    bar.close()
    model.eval()
    return {
        "steps": len(losses),
        "trained_tokens": tokens,
        "texts_cut": cut,
        "max_tokens_used": longest,
        "first_loss": losses[0],
        "last_loss": losses[-1],
    }


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


# -- lm-eval-pdd make-controlled (arguments: pdd_tasks/tools/cli.py) ---------------------------------------


def run_tuning(command: str, model: str | None, tune, done) -> int:
    """The command line of a fine-tuning command: ``tune(base)`` with stdout sent to stderr (``base``:
    ``model``, or the default model), a refusal printed as its message (exit status 1); then
    ``done(base, output, manifest)`` on stderr and the output folder on stdout."""
    import contextlib
    import sys

    from pdd_tasks.tools.default_model import DefaultModelError, ensure_default_model

    try:
        with contextlib.redirect_stdout(sys.stderr):
            base = model or ensure_default_model()
            output = tune(base)
    except (DatasetError, DefaultModelError, OutputRefused) as exc:
        print(f"lm-eval-pdd {command}: {exc}", file=sys.stderr)
        return 1
    print(done(base, output, json.loads((output / "manifest.json").read_text())), file=sys.stderr)
    print(output)
    return 0


def run(args) -> int:
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
