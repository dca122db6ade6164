"""The chunked per-position statistics equal the same computation on all positions at once."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from pdd_tasks.backends.token_stats import CPU_CHUNK_ELEMENTS, position_stats


def unchunked(logits, targets):
    logprobs = F.log_softmax(logits, dim=-1, dtype=torch.float32)
    token = logprobs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    probs = logprobs.exp()
    mu = (probs * logprobs).sum(-1)
    sigma = (probs * (logprobs - mu.unsqueeze(-1)).square()).sum(-1).clamp_min(0).sqrt()
    top1 = logprobs.gather(-1, logprobs.argmax(-1, keepdim=True)).squeeze(-1)  # as the Gap-K% scripts pick it
    return token, mu, sigma, top1, bool((logprobs.argmax(-1) == targets).all())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("chunk_elements", [1, 7 * 50, 10**9])
def test_chunks_give_the_unchunked_values(dtype, chunk_elements):
    generator = torch.Generator().manual_seed(0)
    logits = (torch.randn(37, 50, generator=generator) * 4).to(dtype)
    targets = torch.randint(0, 50, (37,), generator=generator)
    stats = position_stats(logits, targets, chunk_elements=chunk_elements)
    token, mu, sigma, top1, greedy = unchunked(logits, targets)
    for got, want in ((stats.logprobs, token), (stats.mu, mu), (stats.sigma, sigma), (stats.top1, top1)):
        assert got.dtype == torch.float32 and got.shape == (37,)
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    assert stats.is_greedy == greedy is False


def test_the_default_chunks_on_a_cpu_give_the_unchunked_values():
    """A 49,152-token vocabulary (the default model's) is taken 21 positions at a time on a CPU."""
    generator = torch.Generator().manual_seed(1)
    logits = (torch.randn(45, 49_152, generator=generator) * 4).to(torch.bfloat16)
    targets = torch.randint(0, 49_152, (45,), generator=generator)
    assert 1 < 45 * 49_152 // CPU_CHUNK_ELEMENTS < 45  # several chunks, each of several positions
    stats = position_stats(logits, targets)
    token, mu, sigma, top1, greedy = unchunked(logits, targets)
    for got, want in ((stats.logprobs, token), (stats.mu, mu), (stats.sigma, sigma), (stats.top1, top1)):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    assert stats.is_greedy == greedy


def test_greedy_text_and_shape_errors():
    logits = torch.full((3, 5), -1.0)
    targets = torch.tensor([0, 2, 4])
    logits[torch.arange(3), targets] = 3.0
    stats = position_stats(logits, targets, chunk_elements=5)
    assert stats.is_greedy
    torch.testing.assert_close(stats.top1, stats.logprobs, rtol=0, atol=0)  # every x_i is the top-1
    with pytest.raises(ValueError, match=r"expected logits \(n, V\) and targets \(n,\)"):
        position_stats(logits, targets[:2])
