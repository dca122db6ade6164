"""Exact repeats of a list of texts (pdd_metrics.repeats) against a brute-force pairwise definition."""

from __future__ import annotations

import doctest
import itertools

import numpy as np
import pytest

import pdd_metrics.repeats
from pdd_metrics.repeats import find_repeats


def repeats_by_definition(keys: list) -> tuple[list[int], list[list[int]]]:
    """The first occurrences and the groups of copies, by comparing every pair."""
    first = [i for i in range(len(keys)) if all(keys[j] != keys[i] for j in range(i))]
    groups = []
    for i in first:
        copies = [j for j in range(len(keys)) if keys[j] == keys[i]]
        if len(copies) > 1:
            groups.append(copies)
    return first, groups


def test_doctests():
    result = doctest.testmod(pdd_metrics.repeats)
    assert result.failed == 0 and result.attempted > 0  # examples that ran, none failed


def test_no_repeats():
    r = find_repeats(["a", "b", "c"])
    assert r.first == (0, 1, 2) and r.groups == ()
    assert r.summary() == {"texts": 3, "distinct": 3, "repeated_texts": 0, "extra_copies": 0, "largest_group": 1}
    assert r.keep.all() and r.representative.tolist() == [0, 1, 2]


def test_empty_list():
    r = find_repeats([])
    assert r.summary() == {"texts": 0, "distinct": 0, "repeated_texts": 0, "extra_copies": 0, "largest_group": 0}


def test_each_text_four_times():
    texts = [f"text {i}" for i in range(5)] * 4
    r = find_repeats(texts)
    assert r.first == (0, 1, 2, 3, 4)
    assert r.groups == tuple((i, i + 5, i + 10, i + 15) for i in range(5))
    assert (r.n_distinct, r.n_extra_copies, r.largest_group) == (5, 15, 4)
    assert r.keep.tolist() == [True] * 5 + [False] * 15
    assert r.representative.tolist() == list(range(5)) * 4


def test_matches_the_pairwise_definition_on_random_lists():
    rng = np.random.default_rng(0)
    for size in (1, 2, 5, 17, 40):
        for alphabet in (1, 3, 10, 100):
            texts = [f"t{int(v)}" for v in rng.integers(alphabet, size=size)]
            r = find_repeats(texts)
            first, groups = repeats_by_definition(texts)
            assert list(r.first) == first
            assert [list(g) for g in r.groups] == groups
            assert r.n_distinct == len(set(texts))
            assert r.keep.sum() == r.n_distinct
            assert [texts[i] for i in r.representative] == texts


def test_normalisation_decides_what_a_copy_is():
    texts = ["The  cat sat", "the cat sat", "The cat sat on the mat"]
    assert find_repeats(texts).groups == ()
    collapse = lambda t: " ".join(t.lower().split())  # noqa: E731
    assert find_repeats(texts, normalise=collapse).groups == ((0, 1),)
    first_three_words = lambda t: " ".join(t.split()[:3])  # noqa: E731
    assert find_repeats(texts, normalise=first_three_words).groups == ((0, 2),)


def test_case_and_whitespace_differences_are_distinct_without_normalisation():
    assert find_repeats(["a", "A", "a ", " a"]).groups == ()


def test_roles_tell_repeats_within_an_input_from_repeats_across_inputs():
    suspects = ["s1", "s2", "shared", "s1"]
    references = ["r1", "shared", "r2", "r2", "r2"]
    roles = ["suspect"] * len(suspects) + ["reference"] * len(references)
    r = find_repeats(suspects + references, roles=roles)
    assert r.groups == ((0, 3), (2, 5), (6, 7, 8))
    assert r.across_roles == ((2, 5),)
    assert r.roles_of((2, 5)) == ("suspect", "reference")
    assert r.summary() == {
        "texts": 9,
        "distinct": 5,
        "repeated_texts": 3,
        "extra_copies": 4,
        "largest_group": 3,
        "by_role": {"suspect": {"texts": 4, "distinct": 3}, "reference": {"texts": 5, "distinct": 3}},
        "across_roles": 1,
    }


def test_the_same_file_given_twice_is_all_copies_across_roles():
    references = [f"ref {i}" for i in range(40)]
    roles = ["ref.jsonl#1"] * 40 + ["ref.jsonl#2"] * 40
    r = find_repeats(references + references, roles=roles)
    assert r.n_distinct == 40 and r.n_extra_copies == 40 and len(r.across_roles) == 40
    assert r.summary()["by_role"] == {
        "ref.jsonl#1": {"texts": 40, "distinct": 40},
        "ref.jsonl#2": {"texts": 40, "distinct": 40},
    }


def test_labels_as_roles_find_a_text_in_both_classes():
    texts = ["m", "n", "m", "x"]
    labels = [1, 0, 0, 1]
    r = find_repeats(texts, roles=labels)
    assert r.across_roles == ((0, 2),)
    assert r.summary()["by_role"] == {"1": {"texts": 2, "distinct": 2}, "0": {"texts": 2, "distinct": 2}}


def test_order_of_groups_is_the_order_of_first_occurrence_for_every_permutation():
    texts = ["b", "a", "b", "a", "c"]
    for perm in itertools.permutations(range(len(texts))):
        shuffled = [texts[i] for i in perm]
        r = find_repeats(shuffled)
        assert [g[0] for g in r.groups] == sorted(g[0] for g in r.groups)
        assert all(list(g) == sorted(g) for g in r.groups)


def test_refuses_mismatched_roles_and_non_texts():
    with pytest.raises(ValueError, match="2 entries for 3 texts"):
        find_repeats(["a", "b", "c"], roles=["x", "y"])
    with pytest.raises(TypeError, match="text 1 is int"):
        find_repeats(["a", 1])
    with pytest.raises(ValueError, match="without roles"):
        find_repeats(["a", "a"]).roles_of((0, 1))
