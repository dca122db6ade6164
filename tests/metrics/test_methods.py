"""Per-text scores of pdd_metrics.methods against values worked out by hand."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest

import pdd_metrics.methods
from pdd_metrics.methods import (
    DCPDD_ABLATIONS,
    dcpdd_score,
    gap_k_score,
    loss_score,
    lowercase_score,
    lowest_k_count,
    min_k_plus_plus_score,
    min_k_score,
    zlib_score,
)


# ---------------------------------------------------------------- loss, zlib, lowercase


def test_loss_score_is_mean_logprob():
    # (-1 - 2 - 4) / 3 = -7/3
    score = loss_score(np.array([-1.0, -2.0, -4.0]))
    assert score == pytest.approx(-7 / 3)
    assert type(score) is float


def test_zlib_score_divides_by_compressed_bytes():
    # mean = (-1 - 3) / 2 = -2; len(zlib.compress(b"hello")) = 13 -> -2/13
    assert zlib_score(np.array([-1.0, -3.0]), "hello") == pytest.approx(-2 / 13)
    # "a" * 100 compresses to 12 bytes: -2/12
    assert zlib_score(np.array([-1.0, -3.0]), "a" * 100) == pytest.approx(-2 / 12)
    # UTF-8 bytes, not characters: "héllo wörld" (11 chars, 13 bytes) compresses to 21 bytes
    assert zlib_score(np.array([-2.0]), "héllo wörld") == pytest.approx(-2 / 21)


def test_zlib_score_rejects_empty_text():
    with pytest.raises(ValueError, match="text is empty"):
        zlib_score(np.array([-1.0]), "")


def test_lowercase_score_is_ratio_of_means():
    # mean(lower) = (-4 - 6 - 2) / 3 = -4; mean(orig) = (-1 - 3) / 2 = -2; ratio = 2
    # (lengths differ: the lowercased text tokenizes differently)
    assert lowercase_score(np.array([-1.0, -3.0]), np.array([-4.0, -6.0, -2.0])) == pytest.approx(2.0)


def test_lowercase_score_direction_member_scores_higher():
    # a "member": original memorized (log PPL 0.1), lowercase not (log PPL 2) -> 20
    # a "non-member": both log PPL 2 -> 1
    member = lowercase_score(np.array([-0.1]), np.array([-2.0]))
    non_member = lowercase_score(np.array([-2.0]), np.array([-2.0]))
    assert member == pytest.approx(20.0)
    assert member > non_member


def test_lowercase_score_zero_original_mean_raises():
    with pytest.raises(ValueError, match="exactly 0"):
        lowercase_score(np.array([0.0, 0.0]), np.array([-1.0]))


# ---------------------------------------------------------------- lowest_k_count, Min-K%


@pytest.mark.parametrize(
    ("n", "k", "expected"),
    [
        (10, 0.3, 3),
        (100, 0.29, 29),  # 100 * 0.29 = 28.999999999999996 in floats
        (100, 0.07, 7),  # 100 * 0.07 = 7.000000000000001
        (10, 0.2, 2),
        (4, 0.2, 1),  # 0.8 -> at least one
        (1, 0.01, 1),
        (7, 1.0, 7),
        (9, 0.5, 4),  # floor(4.5)
    ],
)
def test_lowest_k_count(n, k, expected):
    assert lowest_k_count(n, k) == expected


@pytest.mark.parametrize("k", [0, 0.0, -0.1, 1.5, 20, float("nan"), "0.2", None, True])
def test_bad_k_raises(k):
    with pytest.raises(ValueError, match="k must be"):
        lowest_k_count(10, k)
    with pytest.raises(ValueError, match="k must be"):
        min_k_score(np.array([-1.0, -2.0]), k=k)


@pytest.mark.parametrize("n", [0, -3, 2.5])
def test_lowest_k_count_bad_n_raises(n):
    with pytest.raises(ValueError, match="n must be a positive integer"):
        lowest_k_count(n, 0.2)


def test_min_k_score_lowest_fraction_with_ties():
    lp = np.array([-1.0, -3.0, -3.0, -2.0, -5.0])
    # k=0.4: floor(2) = 2 lowest: -5, -3 -> -4
    assert min_k_score(lp, k=0.4) == pytest.approx(-4.0)
    # k=0.6: floor(3) = 3 lowest: -5, -3, -3 (both tied values) -> -11/3
    assert min_k_score(lp, k=0.6) == pytest.approx(-11 / 3)
    # k=1: mean of all = -14/5
    assert min_k_score(lp, k=1.0) == pytest.approx(-14 / 5)


def test_min_k_score_default_k_is_20_percent():
    lp = -np.arange(1.0, 11.0)  # -1 .. -10; 20% of 10 = 2 lowest: -10, -9 -> -9.5
    assert min_k_score(lp) == pytest.approx(-9.5)


def test_min_k_score_short_text_takes_one_token():
    # n*k = 3 * 0.2 = 0.6 < 1 -> the single lowest, -7
    assert min_k_score(np.array([-1.0, -7.0, -2.0])) == pytest.approx(-7.0)


# ---------------------------------------------------------------- Min-K%++


LP = np.array([-1.0, -2.0, -3.0, -0.5])
MU = np.array([-1.5, -1.0, -2.0, -1.0])
SIGMA = np.array([0.5, 2.0, 1.0, 0.0])
# z = [(-1+1.5)/0.5, (-2+1)/2, (-3+2)/1, (-0.5+1)/max(0, 1e-6)] = [1, -0.5, -1, 5e5]


def test_min_k_plus_plus_lowest_z():
    # k=0.5: 2 lowest z: -1, -0.5 -> -0.75
    assert min_k_plus_plus_score(LP, MU, SIGMA, k=0.5) == pytest.approx(-0.75)
    # default k=0.2: floor(0.8) -> 1 token: -1
    assert min_k_plus_plus_score(LP, MU, SIGMA) == pytest.approx(-1.0)


def test_min_k_plus_plus_ties():
    # z = [-1, -1, 0, 2]; k=0.5 -> both tied -1 -> -1; k=0.75 -> -1, -1, 0 -> -2/3
    lp, mu, sigma = np.array([-2.0, -3.0, -1.0, -1.0]), np.array([-1.0, -2.0, -1.0, -2.0]), np.ones(4)
    sigma[3] = 0.5
    assert min_k_plus_plus_score(lp, mu, sigma, k=0.5) == pytest.approx(-1.0)
    assert min_k_plus_plus_score(lp, mu, sigma, k=0.75) == pytest.approx(-2 / 3)


def test_min_k_plus_plus_sigma_floor():
    # k=1 includes the position with sigma = 0: (1 - 0.5 - 1 + 0.5/1e-6) / 4 = 499999.5 / 4
    assert min_k_plus_plus_score(LP, MU, SIGMA, k=1.0) == pytest.approx(124999.875)
    # floor 0.5: z_4 = 0.5 / 0.5 = 1 -> (1 - 0.5 - 1 + 1) / 4 = 0.125
    assert min_k_plus_plus_score(LP, MU, SIGMA, k=1.0, sigma_floor=0.5) == pytest.approx(0.125)
    # the floor also applies to sigma values that are below it but not zero: 0.3 -> 0.5
    sigma = SIGMA.copy()
    sigma[3] = 0.3
    assert min_k_plus_plus_score(LP, MU, sigma, k=1.0, sigma_floor=0.5) == pytest.approx(0.125)


def test_min_k_plus_plus_computes_in_float64():
    lp = np.array([-1 / 3], dtype=np.float32)
    mu = np.array([-0.1], dtype=np.float32)
    sigma = np.array([0.7], dtype=np.float32)
    expected = (np.float64(lp[0]) - np.float64(mu[0])) / np.float64(sigma[0])
    float32_result = float((lp[0] - mu[0]) / sigma[0])
    assert expected != float32_result  # so the test can tell the two apart
    assert min_k_plus_plus_score(lp, mu, sigma) == expected


def test_min_k_plus_plus_errors():
    with pytest.raises(ValueError, match="token_logprobs has 4 values but mu has 3"):
        min_k_plus_plus_score(LP, MU[:3], SIGMA)
    with pytest.raises(ValueError, match="token_logprobs has 4 values but sigma has 2"):
        min_k_plus_plus_score(LP, MU, SIGMA[:2])
    with pytest.raises(ValueError, match="sigma must be >= 0"):
        min_k_plus_plus_score(LP, MU, -SIGMA - 1)
    with pytest.raises(ValueError, match="mu has 1 non-finite"):
        min_k_plus_plus_score(LP, np.array([-1.0, np.nan, -1.0, -1.0]), SIGMA)
    with pytest.raises(ValueError, match="sigma_floor must be a positive"):
        min_k_plus_plus_score(LP, MU, SIGMA, sigma_floor=0.0)
    with pytest.raises(ValueError, match="k must be"):
        min_k_plus_plus_score(LP, MU, SIGMA, k=0)


# ---------------------------------------------------------------- Gap-K%


def test_doctests():
    result = doctest.testmod(pdd_metrics.methods)
    assert result.failed == 0 and result.attempted > 0  # examples that ran, none failed


GAP_LP = np.array([-1.0, -3.0, -0.5, -2.0, -4.0])
GAP_TOP1 = np.array([-1.0, -1.0, -0.5, -1.0, -0.5])
GAP_SIGMA = np.array([1.0, 2.0, 1.0, 0.5, 0.0])
# g = [0, -2/2, 0, -1/0.5, -3.5/max(0, 1e-4)] = [0, -1, 0, -2, -35000]


def test_gap_k_windows_then_lowest_k():
    # window 2: [-0.5, -0.5, -1, -17501]; k = 0.5 -> 2 lowest -> (-1 - 17501) / 2
    assert gap_k_score(GAP_LP, GAP_TOP1, GAP_SIGMA, k=0.5, window=2) == pytest.approx(-17502 / 2)
    # window 3: [-1/3, -1, -35002/3]; default k = 0.2 -> floor(0.6) -> 1 value
    assert gap_k_score(GAP_LP, GAP_TOP1, GAP_SIGMA) == pytest.approx(-35002 / 3)
    # window 1 is no smoothing: k = 0.4 -> the 2 lowest g_i
    assert gap_k_score(GAP_LP, GAP_TOP1, GAP_SIGMA, k=0.4, window=1) == pytest.approx((-2 - 35000) / 2)


def test_gap_k_text_shorter_than_the_window_keeps_its_gaps():
    # 3 tokens, window 6: g = [0, -1, 0] unsmoothed; k = 0.34 -> floor(1.02) = 1 -> -1
    assert gap_k_score(GAP_LP[:3], GAP_TOP1[:3], GAP_SIGMA[:3], k=0.34, window=6) == pytest.approx(-1.0)
    # exactly the window: one average
    assert gap_k_score(GAP_LP[:3], GAP_TOP1[:3], GAP_SIGMA[:3], window=3) == pytest.approx(-1 / 3)


def test_gap_k_every_token_the_top1_scores_zero_the_maximum():
    assert gap_k_score(GAP_TOP1, GAP_TOP1, GAP_SIGMA) == 0.0
    assert gap_k_score(GAP_LP, GAP_TOP1, GAP_SIGMA) < 0.0


def test_gap_k_sigma_floor_is_the_scripts_variance_clamp():
    # the authors' wikimia.py divides by sqrt(clamp(variance, 1e-8)): sigma 0 -> 1e-4, sigma 5e-5 -> 1e-4
    lp, top1 = np.array([-1.0]), np.array([-0.5])
    assert gap_k_score(lp, top1, np.array([0.0])) == pytest.approx(-0.5 / 1e-4)
    assert gap_k_score(lp, top1, np.array([5e-5])) == pytest.approx(-0.5 / 1e-4)
    assert gap_k_score(lp, top1, np.array([0.0]), sigma_floor=0.5) == pytest.approx(-1.0)


def _authors_window_lowmean(gaps: np.ndarray, window: int, ratio: float) -> float:
    """``window_lowmean`` of the Gap-K% scripts (meaoww/gap-k ``wikimia.py``), written out."""
    smoothed = gaps if gaps.size < window else np.convolve(gaps, np.ones(window) / window, mode="valid")
    return float(np.mean(np.sort(smoothed)[: max(1, int(len(smoothed) * ratio))]))


@pytest.mark.parametrize("window", [1, 3, 6])
@pytest.mark.parametrize("ratio", [0.2, 0.5, 1.0])
def test_gap_k_equals_the_authors_formula(window, ratio):
    """The authors' computation on the same per-token values: gap / sqrt(clamp(variance, 1e-8)), then
    window_lowmean (lengths 1 to 40: shorter than, equal to and longer than the window)."""
    rng = np.random.default_rng(window * 10 + int(ratio * 10))
    for n in range(1, 41):
        lp = -rng.exponential(2.0, n)
        top1 = np.maximum(lp, -rng.exponential(0.5, n)) * (rng.random(n) < 0.6) + lp * (rng.random(n) >= 0.6)
        top1 = np.maximum(top1, lp)
        variance = rng.random(n) * 3 * (rng.random(n) < 0.9)  # some exactly 0
        gaps = (lp - top1) / np.sqrt(np.clip(variance, 1e-8, None))
        expected = _authors_window_lowmean(gaps, window, ratio)
        got = gap_k_score(lp, top1, np.sqrt(variance), k=ratio, window=window)
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-12), n


def test_gap_k_errors():
    with pytest.raises(ValueError, match="token_logprobs has 5 values but top1_logprobs has 4"):
        gap_k_score(GAP_LP, GAP_TOP1[:4], GAP_SIGMA)
    with pytest.raises(ValueError, match="token_logprobs has 5 values but sigma has 2"):
        gap_k_score(GAP_LP, GAP_TOP1, GAP_SIGMA[:2])
    with pytest.raises(ValueError, match=r"top1_logprobs\[1\] = -4.0 is below token_logprobs\[1\] = -3.0"):
        gap_k_score(GAP_LP, np.array([-1.0, -4.0, -0.5, -1.0, -0.5]), GAP_SIGMA)
    with pytest.raises(ValueError, match="sigma must be >= 0"):
        gap_k_score(GAP_LP, GAP_TOP1, -GAP_SIGMA - 1)
    for window in (0, 2.0, True):
        with pytest.raises(ValueError, match="window must be a whole number >= 1"):
            gap_k_score(GAP_LP, GAP_TOP1, GAP_SIGMA, window=window)
    with pytest.raises(ValueError, match="k must be"):
        gap_k_score(GAP_LP, GAP_TOP1, GAP_SIGMA, k=0)
    with pytest.raises(ValueError, match="top1_logprobs has 1 non-finite"):
        gap_k_score(GAP_LP, np.array([-1.0, np.nan, -0.5, -1.0, -0.5]), GAP_SIGMA)


# ---------------------------------------------------------------- DC-PDD

L2 = math.log(2)
# vocabulary of 4 ids; f = [1/2, 1/4, 1/8, 1/8] -> -log f = [1, 2, 3, 3] * log 2
LOG_F = np.log(np.array([0.5, 0.25, 0.125, 0.125]))
IDS = np.array([0, 1, 2, 1, 3])  # id 1 repeats at position 3
P = np.array([0.5, 1.0, 0.25, 0.5, 0.125])
LP_DC = np.log(P)
# alpha = p * (-log f[id]) = [0.5*1, 1*2, 0.25*3, 0.5*2, 0.125*3] * L2 = [0.5, 2, 0.75, 1, 0.375] * L2
#       ~ [0.347, 1.386, 0.520, 0.693, 0.260]
# first occurrences: positions 0, 1, 2, 4 (position 3 repeats id 1)
CLD = (0.5 + 2 + 0.75 + 1 + 0.375) * L2 / 5  # uncapped, all 5 positions
SFO_UNCAPPED = (0.5 + 2 + 0.75 + 0.375) * L2 / 4
# with a = 0.6, positions 1 (1.386) and 3 (0.693) are capped to 0.6
LUP_06 = (0.5 * L2 + 0.6 + 0.75 * L2 + 0.6 + 0.375 * L2) / 5
SFO_06 = (0.5 * L2 + 0.6 + 0.75 * L2 + 0.375 * L2) / 4


def test_dcpdd_uncapped():
    assert dcpdd_score(LP_DC, IDS, LOG_F, a=None, first_occurrence_only=False) == pytest.approx(CLD)
    assert dcpdd_score(LP_DC, IDS, LOG_F, a=None) == pytest.approx(SFO_UNCAPPED)


def test_dcpdd_first_occurrence_uses_first_not_last():
    # taking the last occurrence of id 1 (position 3, alpha = 1*L2) instead of the first would give
    wrong = (0.5 + 1 + 0.75 + 0.375) * L2 / 4
    score = dcpdd_score(LP_DC, IDS, LOG_F, a=None)
    assert score == pytest.approx(SFO_UNCAPPED)
    assert score != pytest.approx(wrong)


def test_dcpdd_cap():
    assert dcpdd_score(LP_DC, IDS, LOG_F, a=0.6, first_occurrence_only=False) == pytest.approx(LUP_06)
    assert dcpdd_score(LP_DC, IDS, LOG_F, a=0.6) == pytest.approx(SFO_06)


def test_dcpdd_default_cap_001_clips_everything_here():
    # every alpha here exceeds the default a = 0.01 -> each becomes 0.01 -> mean 0.01
    assert dcpdd_score(LP_DC, IDS, LOG_F) == pytest.approx(0.01)
    # a low-probability token is under the cap: p = 0.001, -log f = log 2 -> 0.000693
    low = dcpdd_score(np.log(np.array([0.001])), np.array([0]), LOG_F)
    assert low == pytest.approx(0.001 * L2)


def test_dcpdd_indexes_frequencies_by_token_id_not_position():
    # one token with id 3: alpha = 1 * (-log 1/8) = 3 * L2 (position 0 would give 1 * L2)
    assert dcpdd_score(np.array([0.0]), np.array([3]), LOG_F, a=None) == pytest.approx(3 * L2)


@pytest.mark.parametrize(("name", "expected"), [("cld", CLD), ("lup", LUP_06), ("sfo", SFO_06)])
def test_dcpdd_ablations(name, expected):
    kwargs = {"a": 0.6, **DCPDD_ABLATIONS[name]}
    assert dcpdd_score(LP_DC, IDS, LOG_F, **kwargs) == pytest.approx(expected)


def test_dcpdd_ablation_table():
    assert DCPDD_ABLATIONS == {
        "cld": {"a": None, "first_occurrence_only": False},
        "lup": {"first_occurrence_only": False},
        "sfo": {"first_occurrence_only": True},
    }


def test_dcpdd_errors():
    with pytest.raises(ValueError, match=r"token id 4 is outside log_reference_freq, which has 4 entries"):
        dcpdd_score(LP_DC, np.array([0, 1, 2, 1, 4]), LOG_F)
    with pytest.raises(ValueError, match=r"token id -1 is outside"):
        dcpdd_score(LP_DC, np.array([0, 1, -1, 1, 3]), LOG_F)
    with pytest.raises(ValueError, match="token_logprobs has 5 values but token_ids has 4"):
        dcpdd_score(LP_DC, IDS[:4], LOG_F)
    with pytest.raises(ValueError, match="integer array"):
        dcpdd_score(LP_DC, IDS.astype(float), LOG_F)
    with pytest.raises(ValueError, match=r"log_reference_freq\[2\] is -inf"):
        dcpdd_score(LP_DC, IDS, np.array([np.log(0.5), np.log(0.25), -np.inf, np.log(0.125)]))
    with pytest.raises(ValueError, match="a must be a positive number"):
        dcpdd_score(LP_DC, IDS, LOG_F, a=0.0)
    with pytest.raises(ValueError, match="got 0 tokens"):
        dcpdd_score(np.array([]), np.array([], dtype=np.int64), LOG_F)


# ---------------------------------------------------------------- shared input errors

# Every registered method (these functions through their registry entries) refuses an empty text, a
# NaN and a 2-D array with the same message: check_method (pdd_tasks/registry/checks.py).


def test_lowercase_empty_second_array_raises():
    with pytest.raises(ValueError, match="lowercase_token_logprobs: got 0 tokens"):
        lowercase_score(np.array([-1.0]), np.array([]))
