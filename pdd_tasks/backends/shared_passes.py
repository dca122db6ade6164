"""lm-eval's ``loglikelihood`` (HF and vLLM) with each request answered from the longest pass that holds its tokens.

A causal model's output at a position depends on the tokens up to it, so the log-probs of a request are
the same positions of any pass whose input begins with its own. Here each request of a ``loglikelihood``
call is answered from the pass of the longest request of the call that begins with its tokens
(:func:`passes_answering`), read on its own positions, so its answer is what its own pass gives, within
float rounding (a pass of another length rounds differently, as any change of batch does in stock
lm-eval). In an eval's run beside ``pdd_contamination`` that folds the eval's question with its gold
answer (and CoDeC's no-context request, the same tokens) into CoDeC's in-context request that has the
question as its context example. Requests cut to the model's window are forwarded as stock does and share
nothing.

- HF (:func:`loglikelihood_tokens_shared`, patch ``hf-shared-passes``): the model's input is ``context +
  continuation[:-1]``; stock lm-eval 0.4.13 forwards requests with the same input once (its logits
  cache), so a question's one-token choices are one pass already, and here also ride on its longer
  choices. Seq2seq models and ``logits_cache=False`` get the stock method.
- vLLM (:func:`loglikelihood_tokens_shared_vllm`, patch ``vllm-shared-passes``): the input is the whole
  request (vLLM's prompt log-probs), and stock forwards every request; here a request whose tokens begin
  another's is read from that one's prompt log-probs.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
import torch.nn.functional as F
from lm_eval.models.utils import Collator
from lm_eval.models.utils_hf import pad_and_concat
from tqdm import tqdm

from pdd_tasks.backends.base import shared_prefixes


def model_input(context: list[int], continuation: list[int], window: int) -> list[int]:
    """The tokens the model reads for a request, as stock: context and continuation but the last token,
    cut from the left to ``window`` tokens.

    >>> model_input([1, 2, 3], [4, 5], window=10)
    [1, 2, 3, 4]
    >>> model_input([1, 2, 3], [4, 5], window=3)
    [2, 3, 4]
    """
    return (context + continuation)[-(window + 1) :][:-1]


def passes_answering(requests: list[tuple[list[int], list[int]]], window: int, whole: bool = False) -> list[int]:
    """For each ``(context, continuation)`` request, the index of the request whose pass answers it: a
    longest one whose model input begins with its own (itself where none does; of identical inputs, one
    of them). The input is ``context + continuation[:-1]`` (HF), or with ``whole`` all of it (vLLM's
    prompt log-probs). A request longer than ``window`` + 1 (``window`` with ``whole``; cut from the left)
    is forwarded on its own.

    >>> passes_answering([([1, 2], [3]), ([1, 2], [3, 4, 5]), ([1], [9]), ([7] * 5, [8])], window=4)
    [1, 1, 1, 3]
    >>> passes_answering([([1, 2], [3]), ([1, 2], [3, 4, 5]), ([1], [9])], window=5, whole=True)
    [1, 1, 2]
    """
    sequences = [
        ((), tuple(context + continuation if whole else model_input(context, continuation, window)))
        if len(context) + len(continuation) <= window + (0 if whole else 1)
        else None
        for context, continuation in requests
    ]
    return shared_prefixes(sequences)


def forwarding_order(requests: list, owners: list[int]) -> tuple[list[int], dict[int, list[int]]]:
    """The requests to forward, longest first (stock's order: the first batch is the largest, so memory runs
    out at once if at all), and for each the requests its pass answers (itself among them).

    >>> forwarding_order([(None, [1], [2]), (None, [1], [2, 3])], [1, 1])
    ([1], {1: [0, 1]})
    """
    answered_by: dict[int, list[int]] = {}
    for index, owner in enumerate(owners):
        answered_by.setdefault(owner, []).append(index)
    return sorted(answered_by, key=lambda i: (-len(requests[i][1]) - len(requests[i][2]), i)), answered_by


def loglikelihood_tokens_shared(
    lm, stock, requests: list, disable_tqdm: bool = False, override_bs: int | None = None
) -> list[tuple[float, bool]]:
    """Replacement of ``HFLM._loglikelihood_tokens``: ``(sum of the continuation's log-probs, whether
    each of its tokens is the greedy one)`` per ``(request strings, context tokens, continuation tokens)``,
    each read from the pass :func:`passes_answering` names; the stock method where the model is not causal
    or its logits cache is off. Batches as stock: longest inputs first, ``batch_size`` rows (``auto``:
    lm-eval's batch-size probe), right-padded."""
    if lm.backend != "causal" or not lm.logits_cache:
        return stock(lm, requests, disable_tqdm=disable_tqdm, override_bs=override_bs)
    owners = passes_answering([(context, continuation) for _, context, continuation in requests], lm.max_length)
    forwarded, answered_by = forwarding_order(requests, owners)
    batch_size = lm.batch_size if lm.batch_size != "auto" else override_bs if override_bs is not None else 0
    batch_fn = lm._batch_scheduler if lm.batch_size == "auto" and forwarded and not override_bs else None
    if batch_fn is not None:
        lm.batch_sizes = {}  # as stock: re-probe for this call's lengths
    answers: list[tuple[float, bool] | None] = [None] * len(requests)
    pbar = tqdm(total=len(requests), disable=(disable_tqdm or (lm.rank != 0)), desc="Running loglikelihood requests")
    for chunk in Collator.get_chunks([requests[i] for i in forwarded], n=batch_size, fn=batch_fn):
        owners_here = forwarded[: len(chunk)]
        forwarded = forwarded[len(chunk) :]
        inputs = [model_input(context, continuation, lm.max_length) for _, context, continuation in chunk]
        width = max(map(len, inputs))
        batch = pad_and_concat(
            width, [torch.tensor(tokens, dtype=torch.long, device=lm.device) for tokens in inputs], padding_side="right"
        )
        log_probs = F.log_softmax(lm._model_call(batch), dim=-1, dtype=lm.softmax_dtype)
        extra = log_probs.shape[1] - width  # virtual tokens of prompt tuning, as stock's ctx_len
        for owner, tokens, row in zip(owners_here, inputs, log_probs, strict=True):
            for index in answered_by[owner]:
                request_str, context, continuation = requests[index]
                length = len(tokens) if index == owner else len(model_input(context, continuation, lm.max_length))
                end = length + extra
                positions = row[end - len(continuation) : end]
                wanted = torch.tensor(continuation, dtype=torch.long, device=positions.device)
                greedy = bool((positions.argmax(dim=-1) == wanted).all())
                answer = (float(positions.gather(1, wanted.unsqueeze(-1)).sum()), greedy)
                answers[index] = answer
                if request_str is not None:  # loglikelihood_rolling's windows cache per document instead
                    lm.cache_hook.add_partial("loglikelihood", request_str, answer)
                pbar.update(1)
    pbar.close()
    return answers


def loglikelihood_tokens_shared_vllm(lm, requests: list, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
    """Replacement of lm-eval's ``VLLM._loglikelihood_tokens``: as stock (prompt log-probs of each input,
    longest first, ``batch_size`` inputs a call, read by stock ``_parse_logprobs``), but only the requests
    that no longer request of the call begins (:func:`passes_answering` with ``whole``) are sent; each other
    is read from the first ``len(its tokens)`` prompt log-probs of the one that answers it."""
    window = lm.max_length - 1  # as stock: vLLM needs room for one generated token
    owners = passes_answering([(context, continuation) for _, context, continuation in requests], window, whole=True)
    forwarded, answered_by = forwarding_order(requests, owners)
    size = int(lm.batch_size) if lm.batch_size != "auto" else 0
    answers: list[tuple[float, bool] | None] = [None] * len(requests)
    pbar = tqdm(total=len(requests), disable=disable_tqdm, desc="Running loglikelihood requests")
    for chunk in Collator.get_chunks(forwarded, n=size):
        inputs = [(requests[i][1] + requests[i][2])[-window:] for i in chunk]
        for owner, output in zip(chunk, lm._model_generate(requests=inputs, generate=False), strict=True):
            for index in answered_by[owner]:
                cache_key, context, continuation = requests[index]
                tokens = (context + continuation)[-window:]
                context_length = len(context) - max(0, len(context) + len(continuation) - window)
                view = SimpleNamespace(prompt_logprobs=output.prompt_logprobs[: len(tokens)])
                answer = lm._parse_logprobs(tokens=tokens, outputs=view, ctxlen=context_length)
                answers[index] = answer
                if cache_key is not None:
                    lm.cache_hook.add_partial("loglikelihood", cache_key, answer)
                pbar.update(1)
    pbar.close()
    return answers
