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

import importlib.metadata
import logging
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from lm_eval.api.instance import Instance
from tqdm import tqdm


logger = logging.getLogger(__name__)

# The capture re-implements the batching of HFLM._loglikelihood_tokens of this release.
SUPPORTED_LM_EVAL_VERSIONS = ("0.4.13",)


@dataclass(frozen=True)
class ModelInfo:
    """What the scores were computed with; the same object is shared by all results of a model."""

    name: str
    backend: str
    vocab_size: int  # size of the model's output distribution (|V| of DC-PDD Eq. 5)
    tokenizer_fingerprint: str
    distribution_stats: str  # how mu/sigma were obtained, e.g. "exact (full vocabulary, float32)"


class TokenScores(tuple):
    """``(sum_logprob, is_greedy)``, as the stock backend answers, plus per-token arrays.

    Attributes (all arrays have one entry per scored token, in text order):
        token_ids: int64, the scored tokens x_1..x_n (the start token x_0 is not included).
        logprobs: float32, log p(x_i | x_<i).
        mu, sigma: float32, mean and standard deviation of log p over the full next-token
            distribution at position i (Min-K%++ Eq. 3-4).
        model: :class:`ModelInfo`.
        truncated_tokens: how many tokens were cut from the end of the text to fit the context.
    """

    def __new__(cls, logprob_sum, is_greedy, token_ids, logprobs, mu, sigma, model, truncated_tokens=0):
        self = super().__new__(cls, (float(logprob_sum), bool(is_greedy)))
        self.token_ids = np.asarray(token_ids, dtype=np.int64)
        self.logprobs = np.asarray(logprobs, dtype=np.float32)
        self.mu = np.asarray(mu, dtype=np.float32)
        self.sigma = np.asarray(sigma, dtype=np.float32)
        self.model = model
        self.truncated_tokens = int(truncated_tokens)
        return self

    def __reduce__(self):  # keeps the arrays through pickling (--use_cache)
        return (
            TokenScores,
            (self[0], self[1], self.token_ids, self.logprobs, self.mu, self.sigma, self.model, self.truncated_tokens),
        )


@dataclass
class PerTokenRequest(Instance):
    """A loglikelihood request whose answer must carry per-token values.

    Arguments are ``("", text)``: an empty context, so the text is scored after the model's start
    token (DC-PDD Eq. 2). ``truncate`` allows cutting a text longer than the context window (the
    beginning is kept); without it such a text is an error. ``topk_logprobs``: how many top
    alternatives per position to ask a server for (backends that only return top-k log-probs).
    """

    truncate: bool = False
    topk_logprobs: int = 20
    exact_mu_sigma: bool = False  # vLLM: ask for the full distribution (prompt_logprobs=-1)


class TextTooLongError(ValueError):
    pass


def check_lm_eval_version() -> None:
    installed = importlib.metadata.version("lm_eval")
    if installed not in SUPPORTED_LM_EVAL_VERSIONS:
        raise RuntimeError(
            f"lm-eval-pdd's per-token capture for the HF backend was written for lm-eval "
            f"{', '.join(SUPPORTED_LM_EVAL_VERSIONS)}, but lm-eval {installed} is installed. "
            f"Install a supported version: pip install 'lm-eval[hf,api]=={SUPPORTED_LM_EVAL_VERSIONS[-1]}'"
        )


def wrap_loglikelihood(cls: type, score_per_token) -> None:
    """Make ``cls.loglikelihood`` answer :class:`PerTokenRequest` s with
    ``score_per_token(lm, requests, disable_tqdm=...)`` (a list of :class:`TokenScores`, in request
    order); every other request goes to the stock method, in one call, unchanged. Idempotent."""
    if getattr(cls.loglikelihood, "_pdd_capture", False):
        return
    stock_loglikelihood = cls.loglikelihood

    def loglikelihood(self, requests, disable_tqdm: bool = False, **kwargs):
        wants_tokens = [isinstance(request, PerTokenRequest) for request in requests]
        if not any(wants_tokens):
            return stock_loglikelihood(self, requests, disable_tqdm=disable_tqdm, **kwargs)
        others = [request for request, wants in zip(requests, wants_tokens) if not wants]
        stock = iter(stock_loglikelihood(self, others, disable_tqdm=disable_tqdm, **kwargs) if others else ())
        per_token = [request for request, wants in zip(requests, wants_tokens) if wants]
        captured = iter(score_per_token(self, per_token, disable_tqdm=disable_tqdm))
        return [next(captured) if wants else next(stock) for wants in wants_tokens]

    loglikelihood._pdd_capture = True
    loglikelihood.__doc__ = stock_loglikelihood.__doc__
    cls.loglikelihood = loglikelihood


def split_after_start_token(lm, request: PerTokenRequest) -> tuple[list[int], list[int]]:
    """``(context, text tokens)`` as stock ``TemplateLM.loglikelihood`` builds them for an empty
    context: the text after the backend's ``prefix_token_id`` (BOS, else EOS), unless the text's
    own first token is that token. Errors on a non-empty context or a text without tokens."""
    context, text = request.args
    if context != "":
        raise ValueError(
            f"{request.task_name} doc {request.doc_id}: per-token requests are scored after the start "
            f"token and take an empty context, got a context of {len(context)} characters."
        )
    tokens = list(lm.tok_encode(text, add_special_tokens=False))
    if not tokens:
        raise ValueError(
            f"{request.task_name} doc {request.doc_id}: the text has no tokens (empty text); "
            f"remove empty texts from the dataset."
        )
    if lm.prefix_token_id != tokens[0]:
        return [lm.prefix_token_id], tokens
    return tokens[:1], tokens[1:]


def install_hf_capture() -> None:
    """Make ``HFLM.loglikelihood`` answer :class:`PerTokenRequest`s with :class:`TokenScores`.

    Idempotent. Requests of every other type reach the stock method exactly as before.
    """
    from lm_eval.models.huggingface import HFLM

    check_lm_eval_version()
    wrap_loglikelihood(HFLM, score_per_token_hf)
    _install_cpu_data_parallel(HFLM)


def _install_cpu_data_parallel(hflm_class) -> None:
    """Let ``HFLM`` split the documents over the processes of a multi-process launch on CPU.

    Under ``accelerate launch --multi_gpu --num_processes N`` (or ``torchrun --nproc_per_node N``) on
    a machine without GPUs, lm-eval 0.4.13's ``HFLM`` creates an ``Accelerator`` with N processes but
    takes its rank and world size from it only when it counts more than one GPU, so every process
    scores every document as rank 0 of 1 and writes its own results. Here ``rank`` and ``world_size``
    come from the accelerator in that case (CPU device, N > 1, HFLM left at 1 process), so the
    harness splits the documents and gathers the per-document metrics on rank 0, as on GPUs. Runs
    that HFLM already distributes, and single-process runs, are unchanged.
    """
    stock_rank, stock_world_size = hflm_class.rank, hflm_class.world_size
    if getattr(stock_rank.fget, "_pdd_capture", False):
        return

    def adopt_accelerator_processes(lm) -> None:
        if lm.__dict__.get("_pdd_processes_checked"):
            return
        lm._pdd_processes_checked = True
        accelerator = getattr(lm, "accelerator", None)
        if (
            accelerator is not None
            and accelerator.num_processes > 1
            and getattr(lm, "_world_size", 1) == 1
            and accelerator.device.type == "cpu"
        ):
            lm._rank, lm._world_size = accelerator.process_index, accelerator.num_processes
            logger.info("CPU data parallelism: process %d of %d", lm._rank, lm._world_size)

    def rank(self):
        adopt_accelerator_processes(self)
        return stock_rank.fget(self)

    def world_size(self):
        adopt_accelerator_processes(self)
        return stock_world_size.fget(self)

    rank._pdd_capture = world_size._pdd_capture = True
    hflm_class.rank = property(rank, doc=stock_rank.__doc__)
    hflm_class.world_size = property(world_size, doc=stock_world_size.__doc__)


def hf_model_info(lm) -> ModelInfo:
    """Identity of an HFLM's model and tokenizer (computed once per model object)."""
    info = getattr(lm, "_pdd_model_info", None)
    if info is None:
        from pdd_tasks.freq_tables import tokenizer_fingerprint

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


def fit_text(request: PerTokenRequest, tokens: list[int], room: int, limit: str, fixes: str) -> tuple[list[int], int]:
    """``(tokens, number cut)``: a text's ``tokens`` cut to their first ``room`` if the request allows
    truncation; a longer text is otherwise a :class:`TextTooLongError`, saying that it has "more than"
    ``limit`` and suggesting ``fixes`` or truncation. Shared by the hf, vLLM and API captures."""
    truncated = max(0, len(tokens) - room)
    if truncated and not request.truncate:
        raise TextTooLongError(
            f"{request.task_name} doc {request.doc_id}: the text has {len(tokens)} tokens, more than {limit}. "
            f"{fixes}, or allow truncation with --metadata '{{\"truncate\": true}}' (keeps the first {room} "
            f"tokens of each long text)."
        )
    return (tokens[:room] if truncated else tokens), truncated


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
