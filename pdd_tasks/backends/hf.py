"""Per-token log-prob capture for lm-eval's stock HF backend (``--model hf``).

Every lm-eval backend answers a loglikelihood request with ``(sum_logprob, is_greedy)`` and
throws the per-token values away. The pdd tasks need them (and, for Min-K%++, the mean and
standard deviation of the log-prob distribution at every position), so they send
:class:`PerTokenRequest` instances, and :func:`install_hf_capture` teaches ``HFLM.loglikelihood``
to answer those with a :class:`TokenScores`: the same ``(sum_logprob, is_greedy)`` tuple, carrying
the arrays as attributes. All other requests of the run go to the stock method, unchanged.

The pdd tasks call :func:`install_hf_capture` when lm-eval loads them, which is after the CLI has
created the model; the model looks ``loglikelihood`` up on its class at answer time, so the patch
takes effect in the same run (see HARNESS.md, "Order in lm_eval run").
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F
from tqdm import tqdm

from pdd_tasks.backends.base import (
    ModelInfo,
    PerTokenRequest,
    TokenScores,
    check_lm_eval_version,
    fit_text,
    split_after_start_token,
    wrap_loglikelihood,
)
from pdd_tasks.backends.cpu_parallel import install_cpu_data_parallel


logger = logging.getLogger(__name__)


def install_hf_capture() -> None:
    """Make ``HFLM.loglikelihood`` answer :class:`PerTokenRequest`s with :class:`TokenScores`.

    Idempotent. Requests of every other type reach the stock method exactly as before.
    """
    from lm_eval.models.huggingface import HFLM

    check_lm_eval_version()
    wrap_loglikelihood(HFLM, score_per_token_hf)
    install_cpu_data_parallel(HFLM)


def hf_model_info(lm) -> ModelInfo:
    """Identity of an HFLM's model and tokenizer (computed once per model object)."""
    info = getattr(lm, "_pdd_model_info", None)
    if info is None:
        from pdd_tasks.freq.tables import tokenizer_fingerprint

        config = lm.model.config
        vocab_size = lm.model.get_output_embeddings().weight.shape[0]
        info = ModelInfo(
            name=str(getattr(config, "name_or_path", "") or type(lm.model).__name__),
            backend="hf",
            vocab_size=int(vocab_size),
            tokenizer_fingerprint=tokenizer_fingerprint(lm.tokenizer),
            distribution_stats="exact (full vocabulary, float32)",
        )
        lm._pdd_model_info = info
    return info


def _encode_text(lm, request: PerTokenRequest) -> tuple[list[int], list[int], int]:
    """Tokens as stock ``TemplateLM.loglikelihood`` builds them for an empty context."""
    context_enc, continuation_enc = split_after_start_token(lm, request)
    continuation_enc, truncated = fit_text(
        request,
        continuation_enc,
        room=lm.max_length,
        limit=f"the model's context window of {lm.max_length} tokens",
        fixes="Score shorter texts, a model with a longer context",
    )
    return context_enc, continuation_enc, truncated


def score_per_token_hf(lm, requests: list[PerTokenRequest], disable_tqdm: bool = False) -> list[TokenScores]:
    """Answer per-token requests with one forward pass each, batched as HFLM batches.

    Sorting, batch size (including ``auto``), right padding and the model call are those of
    ``HFLM._loglikelihood_tokens``; the log-softmax is taken in float32 on the model's device, and
    mu/sigma are reduced there over the full vocabulary, so only O(tokens) values leave the device.
    """
    from lm_eval.models.utils import Collator
    from lm_eval.models.utils_hf import pad_and_concat

    if lm.backend != "causal":
        raise ValueError("lm-eval-pdd scores causal language models only (--model hf with a decoder-only model).")
    info = hf_model_info(lm)
    encoded = [(request.args, *_encode_text(lm, request)) for request in requests]
    truncated = sum(cut > 0 for *_, cut in encoded)
    if truncated:
        logger.warning(
            "%d text(s) were longer than the context window (%d tokens) and were truncated to their "
            "first %d tokens, as asked with truncate=true.",
            truncated,
            lm.max_length,
            lm.max_length,
        )

    re_ord = Collator(encoded, sort_fn=lambda req: (-len(req[1] + req[2]), tuple(req[1] + req[2])))
    auto = lm.batch_size == "auto"
    if auto:
        lm.batch_sizes = {}
    chunks = re_ord.get_batched(
        n=0 if auto else lm.batch_size,
        batch_fn=lm._batch_scheduler if auto and len(re_ord) > 0 else None,
    )
    results = []
    pbar = tqdm(total=len(encoded), disable=(disable_tqdm or lm.rank != 0), desc="Scoring texts (per-token log-probs)")
    for chunk in chunks:
        inputs = [torch.tensor((ctx + cont)[:-1], dtype=torch.long, device=lm.device) for _, ctx, cont, _ in chunk]
        input_lengths = [len(inp) for inp in inputs]
        batch = pad_and_concat(max(input_lengths), inputs, padding_side="right")  # pads `inputs` in place
        logprobs = F.log_softmax(lm._model_call(batch), dim=-1, dtype=torch.float32)
        for (request_args, _, cont, cut), row, length in zip(chunk, logprobs, input_lengths, strict=True):
            positions = row[length - len(cont) : length]  # [n, V]: predictions of x_1..x_n
            targets = torch.tensor(cont, dtype=torch.long, device=lm.device)
            token_logprobs = positions.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
            probs = positions.exp()
            mu = (probs * positions).sum(-1)
            sigma = (probs * (positions - mu.unsqueeze(-1)).square()).sum(-1).clamp_min(0).sqrt()
            is_greedy = bool((positions.argmax(-1) == targets).all())
            answer = TokenScores(
                token_logprobs.sum(),
                is_greedy,
                cont,
                token_logprobs.cpu().numpy(),
                mu.cpu().numpy(),
                sigma.cpu().numpy(),
                info,
                truncated_tokens=cut,
            )
            results.append(answer)
            lm.cache_hook.add_partial("loglikelihood", request_args, answer)
            pbar.update(1)
    pbar.close()
    return re_ord.get_original(results)
