"""Fine-tuning a causal LM on texts: how the controls are made (:mod:`pdd_tasks.tools.builders.controlled`,
:mod:`pdd_tasks.tools.builders.ordered`).

:func:`tuned_copy` loads a model in float32 and trains it in place (:func:`fine_tune`: AdamW at a
constant learning rate, each text after the model's start token or as its tokenizer encodes it);
:class:`TuningSettings` holds every choice, recorded in the manifest of what is built.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from pdd_tasks.errors import UserError
from pdd_tasks.tools.arg_types import MAX_EPOCHS


#: The most optimizer steps a fine-tuning may plan (epochs x batches an epoch): a million steps of the
#: default model take days on a CPU and hours on a GPU; the shipped controls plan under 1,000.
MAX_STEPS = 1_000_000


class TuningTooLong(UserError):
    """The fine-tuning asked for is beyond :data:`MAX_EPOCHS` or :data:`MAX_STEPS`; refused before the
    model is loaded, naming the option that makes it long."""


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


def start_token_id(tokenizer) -> int:
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


def planned_steps(texts: int, settings: TuningSettings) -> int:
    """The optimizer steps of a fine-tuning on ``texts`` texts: ``epochs`` x the batches of an epoch.

    >>> planned_steps(10, TuningSettings(batch_size=3, epochs=2))
    8
    """
    return settings.epochs * -(-texts // settings.batch_size)


def check_steps(texts: int, settings: TuningSettings) -> int:
    """:func:`planned_steps`, refused with :class:`TuningTooLong` above :data:`MAX_EPOCHS` epochs or
    :data:`MAX_STEPS` steps (the message names ``--epochs``, ``--batch-size`` and the texts)."""
    if settings.epochs > MAX_EPOCHS:
        raise TuningTooLong(
            f"--epochs {settings.epochs:,}: at most {MAX_EPOCHS:,} epochs (the controls use 1 to 3). Ask for fewer epochs."
        )
    steps = planned_steps(texts, settings)
    if steps > MAX_STEPS:
        raise TuningTooLong(
            f"{texts:,} training texts x {settings.epochs:,} epochs at --batch-size {settings.batch_size:,} = "
            f"{steps:,} optimizer steps, more than {MAX_STEPS:,}. Ask for fewer (lower --epochs, fewer texts, or a "
            "larger --batch-size)."
        )
    return steps


def tuned_copy(
    base_model: str | Path, texts: list[str], settings: TuningSettings, progress: bool = True, start: str = "always"
):
    """``base_model`` loaded in float32 and fine-tuned on ``texts`` (:func:`fine_tune`, ``start``); returns
    the model, its tokenizer and the training statistics (with ``seconds``). A fine-tuning too long
    (:func:`check_steps`) is refused before the model is loaded."""
    check_steps(len(texts), settings)
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
    after the start token (:func:`start_token_id`, as lm-eval scores a whole text); ``"tokenizer"``,
    each text as its tokenizer encodes it, special tokens included (a start token only where the
    tokenizer adds one, as lm-eval encodes a request's context and CoDeC scores an example).

    Each training text (its start token included) is cut at ``settings.max_tokens`` or at the model's
    context (:func:`model_context`), whichever is shorter: a longer one would index past the model's
    position embeddings.

    Before the first step it prints (stderr) the planned steps (refused above the bounds of
    :func:`check_steps`), and after it an estimate of the time they take at that step's speed."""
    import torch
    from tqdm import tqdm

    steps = check_steps(len(texts), settings)
    print(
        f"fine-tuning: {len(texts):,} texts x {settings.epochs:,} epochs at batch size {settings.batch_size:,} = "
        f"{steps:,} optimizer steps",
        file=sys.stderr,
    )

    if start not in ("always", "tokenizer"):
        raise ValueError(f"start must be 'always' or 'tokenizer', got {start!r}")
    start_id = start_token_id(tokenizer)
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
    began = time.perf_counter()
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
            if len(losses) == 1 and steps > 1:
                print(f"fine-tuning: {estimate(time.perf_counter() - began, steps)}", file=sys.stderr)
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


def estimate(first_step: float, steps: int) -> str:
    """What the first step's time (seconds) says of ``steps`` steps, in words.

    >>> estimate(0.5, 1200)
    'first step 0.50 s: about 10.0 min for 1,200 steps'
    """
    total = first_step * steps
    for unit, seconds in (("days", 86400), ("h", 3600), ("min", 60)):
        if total >= seconds:
            return f"first step {first_step:.2f} s: about {total / seconds:.1f} {unit} for {steps:,} steps"
    return f"first step {first_step:.2f} s: about {total:.0f} s for {steps:,} steps"
