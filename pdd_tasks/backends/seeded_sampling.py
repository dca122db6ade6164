"""Seeded sampling on lm-eval's HF backend: SaMIA's continuations, many to a batch, each from its own seed.

SaMIA (``samia`` in :mod:`pdd_tasks.registry`) sends ``samia_samples`` ``generate_until`` requests per
text: one context (the text's prefix), the same sampling keys, and a ``seed`` key of its own. vLLM's
``SamplingParams`` and completion servers take that key natively. ``HFLM`` has no such key, and it
batches only requests whose generation keys are all equal, so it would sample each continuation
alone, and at batch size 1 a small model spends most of its time outside the matrix products
(``benchmarks/samia_cost.py`` measures the two side by side). And sampling a batch under one
``torch.manual_seed`` would make a row's text depend on the rows beside it.

:func:`sample_seeded` (patch ``hf-seeded-generation``) samples the requests that share a
context and all keys but the seed together, up to the run's batch size a batch, with
:class:`SeededSampling`: each row draws its tokens from its own ``torch.Generator`` seeded with its
request's seed. A continuation is therefore a function of its context, its keys and its seed, not
of the batch it was sampled in, the batch size or the order of the run; up to the rounding of a
batched matrix product, which can differ from a single row's in the last bits and so could move a
draw that falls within ~1e-6 of a token's cumulative-probability boundary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from tqdm import tqdm


__all__ = ["SeededSampling", "is_seeded", "sample_seeded"]


def is_seeded(request) -> bool:
    """Whether a ``generate_until`` request carries a ``seed`` generation key (SaMIA's continuations)."""
    return isinstance(request.args[1], dict) and "seed" in request.args[1]


class SeededSampling:
    """A ``transformers`` logits processor: row ``i`` of the batch draws its next token from
    ``generators[i]``, after the warpers ``generate(do_sample=True)`` would apply (temperature, top-k,
    top-p), and every other token is then made impossible, so that greedy search keeps the draw.

    The distribution is ``generate``'s sampling distribution (its own warper classes, then one
    ``torch.multinomial`` draw from the softmax); only the source of randomness is per row.
    """

    def __init__(self, seeds: Sequence[int], temperature: float = 1.0, top_k: int | None = None, top_p: float = 1.0):
        from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

        self.seeds = [int(seed) for seed in seeds]
        self.generators: list[torch.Generator] | None = None
        self.warpers = []
        if temperature != 1.0:
            self.warpers.append(TemperatureLogitsWarper(temperature))
        if top_k:
            self.warpers.append(TopKLogitsWarper(top_k))
        if top_p < 1.0:
            self.warpers.append(TopPLogitsWarper(top_p))

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.generators is None:  # made on the device of the scores, at the first step
            self.generators = [torch.Generator(device=scores.device).manual_seed(seed) for seed in self.seeds]
        for warper in self.warpers:
            scores = warper(input_ids, scores)
        probs = torch.softmax(scores.float(), dim=-1)
        drawn = torch.cat(
            [
                torch.multinomial(row, 1, generator=generator)
                for row, generator in zip(probs, self.generators, strict=True)
            ]
        )
        kept = torch.full_like(scores, -math.inf)
        return kept.scatter_(1, drawn[:, None], 0.0)


def _group_key(context: str, gen_kwargs: dict) -> tuple:
    return context, tuple(sorted((key, repr(value)) for key, value in gen_kwargs.items() if key != "seed"))


def _sample_batch(lm, context: str, gen_kwargs: dict, seeds: list[int]) -> list[str]:
    """``len(seeds)`` continuations of ``context`` under ``gen_kwargs`` (one request's keys, its seed
    aside), row ``i`` drawn under ``seeds[i]``; decoded and cut at the stop sequences as
    ``HFLM.generate_until`` does."""
    from lm_eval.models.utils import handle_stop_sequences, normalize_gen_kwargs, postprocess_generated_text
    from transformers import LogitsProcessorList

    kwargs = normalize_gen_kwargs({k: v for k, v in gen_kwargs.items() if k != "seed"}, lm.max_gen_toks)
    until = handle_stop_sequences(
        kwargs.pop("until", None), eos=lm.tok_decode(lm.eot_token_id, skip_special_tokens=False)
    )
    max_gen_toks = kwargs.pop("max_gen_toks")
    causal = lm.backend == "causal"
    context_ids, attention_mask = lm.tok_batch_encode(
        [context] * len(seeds),
        left_truncate_len=lm.max_length - max_gen_toks if causal else lm.max_length,
        truncation=lm.truncation,
    )
    if kwargs.pop("do_sample", False):
        sampling = {name: kwargs.pop(name) for name in ("temperature", "top_k", "top_p") if name in kwargs}
        kwargs["logits_processor"] = LogitsProcessorList([SeededSampling(seeds, **sampling)])
    output = lm._model_generate(
        context=context_ids.to(lm.device),
        attention_mask=attention_mask.to(lm.device),
        stop=until,
        max_length=context_ids.shape[1] + max_gen_toks,
        do_sample=False,
        **kwargs,
    )
    think_end = lm.think_end_token
    texts = []
    for tokens in output.tolist():
        tokens = tokens[context_ids.shape[1] :] if causal else tokens
        if isinstance(think_end, int) and think_end in tokens:
            tokens = tokens[len(tokens) - tokens[::-1].index(think_end) :]
        text = lm.tok_decode(tokens)
        text = text.lstrip() if isinstance(think_end, int) else text
        texts.append(postprocess_generated_text(text, until, think_end if isinstance(think_end, str) else None))
    return texts


def sample_seeded(lm, requests: list, disable_tqdm: bool = False) -> list[str]:
    """The continuations of seeded ``generate_until`` requests, in request order: grouped by context
    and other keys, up to ``lm.batch_size`` rows a batch (the whole group where it is ``auto``), each
    row under its own seed (:class:`SeededSampling`). lm-eval's ``--use_cache`` hook is told each
    answer, as by the stock method (it keeps none of a sampled request)."""
    groups: dict[tuple, list[int]] = {}
    for i, request in enumerate(requests):
        groups.setdefault(_group_key(*request.args), []).append(i)
    rows = lm.batch_size if isinstance(lm.batch_size, int) and lm.batch_size > 0 else None
    answers: list[str] = [""] * len(requests)
    bar = tqdm(
        total=len(requests), disable=disable_tqdm or lm.rank != 0, desc="Sampling seeded generate_until requests"
    )
    for members in groups.values():
        size = rows or len(members)
        for start in range(0, len(members), size):
            batch = members[start : start + size]
            context, gen_kwargs = requests[batch[0]].args
            texts = _sample_batch(lm, context, gen_kwargs, [requests[i].args[1]["seed"] for i in batch])
            for i, text in zip(batch, texts, strict=True):
                answers[i] = text
                lm.cache_hook.add_partial("generate_until", requests[i].args, text)
            bar.update(len(batch))
    bar.close()
    return answers
