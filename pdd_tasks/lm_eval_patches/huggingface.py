"""The patches of lm-eval's HF model (``lm_eval/models/huggingface.py``, ``HFLM``): per-token requests
routed to the HF capture, SaMIA's seeded sampling, a CPU launch of several processes split, and each
ordinary request answered from the longest pass that holds its tokens."""

from __future__ import annotations

from pdd_tasks.backends.base import route_requests
from pdd_tasks.backends.cpu_parallel import adopt_accelerator_processes
from pdd_tasks.backends.hf import score_per_token_hf
from pdd_tasks.backends.seeded_sampling import is_seeded, sample_seeded
from pdd_tasks.backends.shared_passes import loglikelihood_tokens_shared
from pdd_tasks.lm_eval_patches.core import Patch, _routing_to, register


def _adopting_accelerator_processes(stock: property) -> property:
    """Replacement of ``HFLM.rank`` / ``HFLM.world_size``: the stock property after
    :func:`adopt_accelerator_processes`."""

    def getter(self):
        adopt_accelerator_processes(self)
        return stock.fget(self)

    return property(getter, doc=stock.__doc__)


def _sampling_seeded_requests(stock):
    """Replacement of ``HFLM.generate_until``: requests with a ``seed`` generation key (SaMIA's
    continuations) sampled many to a batch, each row under its own seed
    (:func:`~pdd_tasks.backends.seeded_sampling.sample_seeded`); the others by the stock method, in one
    call and unchanged (:func:`route_requests`)."""

    def generate_until(self, requests, disable_tqdm: bool = False):
        return route_requests(self, requests, stock, sample_seeded, disable_tqdm, ours=is_seeded)

    return generate_until


def _sharing_passes(stock):
    """Replacement of ``HFLM._loglikelihood_tokens``: :func:`loglikelihood_tokens_shared` (the stock
    method for a seq2seq model or with the logits cache off)."""

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, override_bs=None):
        return loglikelihood_tokens_shared(self, stock, requests, disable_tqdm=disable_tqdm, override_bs=override_bs)

    return _loglikelihood_tokens


def _hflm() -> list[type]:
    from lm_eval.models.huggingface import HFLM

    return [HFLM]


register(
    Patch(
        name="hf-loglikelihood",
        purpose=(
            "--model hf answers the pdd tasks' PerTokenRequests with per-token log-probs, mu and sigma "
            "(score_per_token_hf), as --model hf-pdd does; other requests reach the stock method unchanged"
        ),
        changes="models/huggingface.py: HFLM.loglikelihood",
        when="always",
        targets=lambda: [(cls, "loglikelihood") for cls in _hflm()],
        replacement=_routing_to(score_per_token_hf),
    ),
    Patch(
        name="hf-seeded-generation",
        purpose=(
            "--model hf honours a generate_until request's seed key (SaMIA's samples; vLLM and completion "
            "servers take it natively): requests that differ only in their seed are sampled together, each row "
            "from a generator of its own seed, so a continuation depends on its seed, not on the batch or order"
        ),
        changes="models/huggingface.py: HFLM.generate_until",
        when="always",
        targets=lambda: [(cls, "generate_until") for cls in _hflm()],
        replacement=_sampling_seeded_requests,
    ),
    Patch(
        name="hf-cpu-processes",
        purpose=(
            "a multi-process CPU launch (accelerate launch --multi_gpu on CPU) splits the documents over "
            "the processes instead of every process scoring all of them (adopt_accelerator_processes)"
        ),
        changes="models/huggingface.py: HFLM.rank, HFLM.world_size",
        when="always",
        targets=lambda: [(cls, name) for cls in _hflm() for name in ("rank", "world_size")],
        replacement=_adopting_accelerator_processes,
    ),
    Patch(
        name="hf-shared-passes",
        purpose=(
            "a loglikelihood request is answered from the pass of a longer request of the same call whose input "
            "begins with its own (stock: only from one with the same input, its logits cache), each on its own "
            "positions: an eval's gold answer and CoDeC's no-context request ride on the CoDeC in-context request "
            "that has the question as its context example, a question's one-token choices on its longer ones"
        ),
        changes="models/huggingface.py: HFLM._loglikelihood_tokens",
        when="always",
        targets=lambda: [(cls, "_loglikelihood_tokens") for cls in _hflm()],
        replacement=_sharing_passes,
    ),
)
