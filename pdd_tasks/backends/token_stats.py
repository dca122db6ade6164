"""Per-token values from a model's logits, computed a few positions at a time.

The HF capture needs, for every scored position i, log p(x_i | x_<i), the most likely token's
log-prob (Gap-K%) and the mean and standard deviation of log p over the whole next-token
distribution (Min-K%++ Eq. 3-4). Taking the
log-softmax of a whole batch at once, as the stock backend does, holds a second ``[batch, length,
vocab]`` float32 tensor beside the logits, and the statistics add several more of one text's size.
Here the positions of one text are taken in chunks whose ``positions x vocab`` float32 temporaries
stay under :data:`CHUNK_ELEMENTS` (:data:`CPU_CHUNK_ELEMENTS` on a CPU), so the logits themselves are
the peak.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


#: At most this many float32 values per temporary on a GPU (2**24 values = 64 MiB): 110 positions of
#: a 151,936-token vocabulary, 341 of a 49,152-token one (fewer, larger kernels).
CHUNK_ELEMENTS = 2**24

#: On a CPU, 2**20 values (4 MiB, 21 positions of a 49,152-token vocabulary): the ten or so passes
#: over a chunk then find it in the cache, and glibc serves the temporaries from the heap instead of
#: mapping (and faulting in) fresh pages for each (docs/performance.md, "The capture's statistics").
CPU_CHUNK_ELEMENTS = 2**20


@dataclass(frozen=True)
class PositionStats:
    """Per-position values of one text, on the logits' device, float32.

    Attributes:
        logprobs: log p(x_i | x_<i), shape (n,).
        mu: sum_v p_v log p_v at each position, shape (n,).
        sigma: sqrt(sum_v p_v (log p_v - mu)^2), shape (n,).
        top1: max_v log p_v at each position (the most likely token's log-prob), shape (n,).
        is_greedy: whether every x_i is the most likely token at its position.
    """

    logprobs: torch.Tensor
    mu: torch.Tensor
    sigma: torch.Tensor
    top1: torch.Tensor
    is_greedy: bool


def position_stats(logits: torch.Tensor, targets: torch.Tensor, chunk_elements: int | None = None) -> PositionStats:
    """Log-probs of ``targets``, the largest log-prob, and the distribution's mean and standard deviation of log p.

    Args:
        logits: shape (n, V), the model's outputs at the positions that predict x_1..x_n (any
            float dtype; the log-softmax is taken in float32).
        targets: shape (n,), the token ids x_1..x_n.
        chunk_elements: at most this many values (positions x V) per float32 temporary (default:
            :data:`CPU_CHUNK_ELEMENTS` for logits on a CPU, :data:`CHUNK_ELEMENTS` elsewhere).

    Returns:
        :class:`PositionStats`, equal (to float32 rounding) to the same computation on all
        positions at once.
    """
    if logits.ndim != 2 or targets.shape != logits.shape[:1]:
        raise ValueError(
            f"expected logits (n, V) and targets (n,); got {tuple(logits.shape)} and {tuple(targets.shape)}"
        )
    if chunk_elements is None:
        chunk_elements = CPU_CHUNK_ELEMENTS if logits.device.type == "cpu" else CHUNK_ELEMENTS
    step = max(1, chunk_elements // max(1, logits.shape[1]))
    logprobs, mus, sigmas, tops = [], [], [], []
    greedy = True
    for start in range(0, logits.shape[0], step):
        block = F.log_softmax(logits[start : start + step], dim=-1, dtype=torch.float32)
        wanted = targets[start : start + step]
        logprobs.append(block.gather(-1, wanted.unsqueeze(-1)).squeeze(-1))
        top, top_token = block.max(-1)  # one pass for both
        greedy = greedy and bool((top_token == wanted).all())
        tops.append(top)
        mu, sigma = mu_sigma(block, overwrite=True)  # block is not needed as log-probs any more
        mus.append(mu)
        sigmas.append(sigma)
        del block
    return PositionStats(torch.cat(logprobs), torch.cat(mus), torch.cat(sigmas), torch.cat(tops), greedy)


def mu_sigma(logprobs: torch.Tensor, overwrite: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Min-K%++'s mu_i = sum_v p_v log p_v and sigma_i = sqrt(sum_v p_v (log p_v - mu_i)^2) (Eq. 3-4)
    of each row of full-distribution log-probs, shape (n, V), in their dtype.

    Args:
        logprobs: (n, V), every token's log-prob at each position (any order within a row).
        overwrite: use ``logprobs`` as scratch space (saves one (n, V) temporary; its values are lost).

    Returns:
        ``(mu, sigma)``, each of shape (n,).
    """
    probs = logprobs.exp()
    mu = (probs * logprobs).sum(-1)
    centered = logprobs.sub_(mu.unsqueeze(-1)) if overwrite else logprobs - mu.unsqueeze(-1)
    sigma = (probs * centered.square_()).sum(-1).clamp_min(0).sqrt()
    return mu, sigma
