"""Per-token log-prob capture for lm-eval's HF backend: ``--model hf-pdd``, and ``--model hf``.

Every lm-eval backend answers a loglikelihood request with ``(sum_logprob, is_greedy)`` and
throws the per-token values away. The pdd tasks need them (and, for Min-K%++, the mean and
standard deviation of the log-prob distribution at every position), so they send
:class:`~pdd_tasks.backends.base.PerTokenRequest` instances. :func:`score_per_token_hf` answers
those with a :class:`~pdd_tasks.backends.base.TokenScores`: the same ``(sum_logprob, is_greedy)``
tuple, carrying the arrays as attributes. :class:`PerTokenHFLM` is lm-eval's ``HFLM`` whose
``loglikelihood`` routes the per-token requests there and all other requests of the run to the
stock method, unchanged. It is registered with lm-eval as ``hf-pdd``, the way
``lm_eval/models/hf_steered.py`` adds ``steered`` to the HF backend: importing this module adds
that name and changes nothing of lm-eval's own.

The stock ``--model hf`` gets the same routing from :mod:`pdd_tasks.lm_eval_patches` (patch
``hf-loglikelihood``), applied when a pdd task is built. lm-eval's CLI creates the model before it
imports any task module, so a model name registered by a task module is not known yet when
``--model`` is read; but the model looks ``loglikelihood`` up on its class at answer time, so the
patch takes effect in the same run (docs/architecture.md, "Order in an lm_eval run"). ``hf-pdd``
is known wherever this module is imported before the model is created: the Python API, and
``python -m pdd_tasks.lm_eval_patches`` (lm-eval's own CLI after that import).
"""

from __future__ import annotations

import inspect
import logging

import torch
from lm_eval.api.registry import register_model
from lm_eval.models.huggingface import HFLM

from pdd_tasks.backends.base import (
    ContextLimit,
    EncodedText,
    ModelInfo,
    PerTokenRequest,
    TokenScores,
    answer_per_token,
    cached_model_info,
    route_requests,
)
from pdd_tasks.backends.cpu_parallel import adopt_accelerator_processes
from pdd_tasks.backends.gradients import gradient_norms
from pdd_tasks.backends.token_stats import position_stats


logger = logging.getLogger(__name__)

#: ``HFLM.loglikelihood`` as lm-eval defines it (unwrapped, should lm_eval_patches have replaced it).
STOCK_LOGLIKELIHOOD = inspect.unwrap(HFLM.loglikelihood)


@register_model("hf-pdd")
class PerTokenHFLM(HFLM):
    """lm-eval's HF backend (``HFLM``, same arguments) answering the pdd tasks' per-token requests.

    ``loglikelihood`` hands :class:`PerTokenRequest` s to :func:`score_per_token_hf` and every other
    request to ``HFLM``'s own method, so stock tasks in the same run get exactly the stock answers.
    Multi-process runs on CPU split the documents
    (:func:`~pdd_tasks.backends.cpu_parallel.adopt_accelerator_processes`).
    """

    def loglikelihood(self, requests, disable_tqdm: bool = False, **kwargs):
        """Answer :class:`PerTokenRequest` s with :func:`score_per_token_hf`, every other request with
        the stock ``HFLM.loglikelihood`` (one call, unchanged); answers in request order."""
        return route_requests(self, requests, STOCK_LOGLIKELIHOOD, score_per_token_hf, disable_tqdm, **kwargs)

    @property
    def rank(self):
        adopt_accelerator_processes(self)
        return super().rank

    @property
    def world_size(self):
        adopt_accelerator_processes(self)
        return super().world_size


def hf_model_info(lm) -> ModelInfo:
    """Identity of an HFLM's model and tokenizer (computed once per model object)."""
    return cached_model_info(
        lm,
        "exact",
        lambda: dict(
            name=str(getattr(lm.model.config, "name_or_path", "") or type(lm.model).__name__),
            backend="hf",
            vocab_size=int(lm.model.get_output_embeddings().weight.shape[0]),
            distribution_stats="exact (full vocabulary, float32)",
        ),
    )


def _context_limit(lm) -> ContextLimit:
    """HFLM scores a text of up to ``max_length`` tokens after its start token (one forward pass)."""
    return ContextLimit(
        room=lm.max_length,
        limit=f"the model's context window of {lm.max_length} tokens",
        fixes="Score shorter texts, a model with a longer context",
        window=f"the context window ({lm.max_length} tokens)",
    )


def _hf_batches(lm):
    """HFLM's batching of a sorted ``Collator``: ``batch_size`` items, or with ``--batch_size auto``
    the size lm-eval's ``_batch_scheduler`` probes on the longest text (as ``_loglikelihood_tokens``)."""
    auto = lm.batch_size == "auto"

    def batches(order):
        if auto:
            lm.batch_sizes = {}  # probe again for these requests, as stock does
        return order.get_batched(n=0 if auto else lm.batch_size, batch_fn=lm._batch_scheduler if auto else None)

    return batches


def _answer_batch(lm, info: ModelInfo, batch: list[EncodedText], cuts: list[int]) -> list[TokenScores]:
    """One forward pass for a batch of texts: per-token log-probs, mu, sigma and the top-1 log-prob, in float32.

    Right padding and the model call are those of ``HFLM._loglikelihood_tokens``. The log-softmax
    and mu/sigma (Min-K%++ Eq. 3-4, over the full vocabulary) are computed on the model's device a
    few positions at a time (:func:`~pdd_tasks.backends.token_stats.position_stats`), so the logits
    are the largest tensor held (the stock backend holds their log-softmax beside them), and only
    O(tokens) values leave the device.
    """
    from lm_eval.models.utils_hf import pad_and_concat

    inputs = [torch.tensor((item.context + item.tokens)[:-1], dtype=torch.long, device=lm.device) for item in batch]
    input_lengths = [len(inp) for inp in inputs]
    padded = pad_and_concat(max(input_lengths), inputs, padding_side="right")  # pads `inputs` in place
    logits = lm._model_call(padded)
    answers = []
    for item, cut, row, length in zip(batch, cuts, logits, input_lengths, strict=True):
        targets = torch.tensor(item.tokens, dtype=torch.long, device=lm.device)
        stats = position_stats(row[length - len(item.tokens) : length], targets)  # predictions of x_1..x_n
        answers.append(
            TokenScores(
                stats.logprobs.sum(),
                stats.is_greedy,
                item.tokens,
                stats.logprobs.cpu().numpy(),
                stats.mu.cpu().numpy(),
                stats.sigma.cpu().numpy(),
                info,
                truncated_tokens=cut,
                top1=stats.top1.cpu().numpy(),
            )
        )
    return answers


def score_per_token_hf(lm, requests: list[PerTokenRequest], disable_tqdm: bool = False) -> list[TokenScores]:
    """Answer per-token requests with one forward pass each, batched as HFLM batches.

    Args:
        lm: an ``HFLM`` (or :class:`PerTokenHFLM`) with a causal model.
        requests: the per-token requests.
        disable_tqdm: hide the progress bar.

    Returns:
        One :class:`TokenScores` per request, in request order. Sorting, batch size (including
        ``auto``), right padding and the model call are those of ``HFLM._loglikelihood_tokens``.
        A request with ``gradients`` also gets the norms of its loss's gradient (GradNorm): one more
        forward and one backward pass of that text alone (:func:`~pdd_tasks.backends.gradients.gradient_norms`).
    """
    if lm.backend != "causal":
        raise ValueError("lm-eval-pdd scores causal language models only (--model hf with a decoder-only model).")
    info = hf_model_info(lm)

    def answer_batch(batch: list[EncodedText], cuts: list[int]) -> list[TokenScores]:
        answers = _answer_batch(lm, info, batch, cuts)
        for item, answer in zip(batch, answers, strict=True):
            if requests[item.index].gradients:
                answer.grad_norms = gradient_norms(lm.model, item, lm.device)
        return answers

    return answer_per_token(
        lm,
        requests,
        _context_limit(lm),
        answer_batch,
        desc="Scoring texts (per-token log-probs)",
        disable_tqdm=disable_tqdm,
        batches=_hf_batches(lm),
    )
