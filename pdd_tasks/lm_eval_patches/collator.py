"""The patch of lm-eval's request collator (``lm_eval/models/utils.py``, ``Collator.get_cache``): a
request that shares its forward pass with a longer one (lm-eval's logits cache) is scored on its own
positions of that pass.

The HF backend's logits cache (``HFLM(logits_cache=True)``, the default) groups the requests of one
``loglikelihood`` call by ``context + continuation[:-1]`` (as token ids: the model's input is the same)
and forwards the one with the longest continuation. Stock ``get_cache`` then hands every request of the
group that pass's logits over the *longest* continuation, and ``_loglikelihood_tokens`` gathers each
request's continuation tokens from their *first* positions: right where all continuations have one
token (a multiple-choice question), wrong where they differ in length. They do in a run of an eval with
``pdd_contamination``: CoDeC's no-context request is the example's first words, then the rest
(``pdd_tasks.dataset_tests.codec``), and the example is the eval's question with its gold answer, so it
forms one group with the eval's gold request, and the eval's answer was read at the positions of CoDeC's
first scored tokens. Here each request gets the last ``len(its continuation)`` positions of the pass: the
positions that predict its own continuation (every request of the group ends where the input ends), so
each answer is what its own pass gives and the shared pass is forwarded once.
"""

from __future__ import annotations

from pdd_tasks.lm_eval_patches.core import Patch, register


def _own_positions(stock):
    """Replacement of ``Collator.get_cache``: as stock, but each request of a cache hit of several
    gets the logits of its own continuation's positions (the last ``len(continuation)`` of the pass)."""

    def get_cache(self, req_str, cxt_toks, cont_toks, logits):
        for key, continuation, shared in stock(self, req_str=req_str, cxt_toks=cxt_toks, cont_toks=cont_toks, logits=logits):  # fmt: skip
            yield key, continuation, shared[:, shared.shape[1] - len(continuation) :]

    return get_cache


def _collator() -> list[type]:
    from lm_eval.models.utils import Collator

    return [Collator]


register(
    Patch(
        name="logits-cache-own-positions",
        purpose=(
            "requests that share one forward pass through the HF logits cache (same context + continuation[:-1] "
            "tokens) are each scored on their own continuation's positions, not the longest one's first: an eval's "
            "gold answer and CoDeC's no-context request of the same question are forwarded once and both answered "
            "as alone"
        ),
        changes="models/utils.py: Collator.get_cache",
        when="always",
        targets=lambda: [(cls, "get_cache") for cls in _collator()],
        replacement=_own_positions,
    ),
)
