"""Shared fixtures: the tiny models the tests use (GPT-2 without and with BOS, Llama, BERT and RoBERTa
masked LMs), built on the spot once per test run (:mod:`support.models`); a reference table; a
completions server; lm-eval's task index built once; an unlabelled run. The command-line runners and
other builders are in the ``support`` package (``tests/support/``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import in_process
from support.bad_input import MEMBERS, NON_MEMBERS, lm_eval_custom, write_jsonl
from support.harness import OFFLINE, wikimia_rows
from support.models import (
    build_bert,
    build_bos_model,
    build_roberta,
    build_table_for,
    build_tiny_llama,
    build_tiny_model,
    train_on,
)


# Under pytest-xdist (.ci/test runs two workers), each worker computes on its share of the cores, so
# the workers do not oversubscribe them (torch and OpenMP would each start one thread per core); the
# processes a test starts inherit the same share.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") != "1":
    _share = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(_share))
    import torch

    torch.set_num_threads(_share)


#: What the tests' processes and in-process runs have in their environment (no hub, quiet tokenizers).
os.environ.update(OFFLINE)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-gpt2"))


@pytest.fixture(scope="session")
def tiny_table(tiny_model, tmp_path_factory) -> Path:
    return build_table_for(tiny_model, tmp_path_factory.mktemp("tables") / "tiny.npz")


@pytest.fixture(scope="session")
def trained_tiny(tmp_path_factory) -> dict:
    """A tiny GPT-2 (seed 2) trained for 300 steps on 24 WikiMIA-32 texts, and its table: ``members``
    are those texts, ``unseen`` the other 752 of the file (both in one shuffled order, seed 1). Tests
    read it and write nothing into it."""
    import random

    texts = [row["input"] for row in wikimia_rows(32)]
    random.Random(1).shuffle(texts)
    tmp = tmp_path_factory.mktemp("trained-tiny")
    model_dir = build_tiny_model(tmp / "model", seed=2)
    train_on(model_dir, texts[:24], steps=300)
    table = build_table_for(model_dir, tmp / "table.npz")
    return {"model": model_dir, "table": table, "members": texts[:24], "unseen": texts[24:]}


@pytest.fixture(scope="session")
def bos_model(tmp_path_factory) -> Path:
    """:func:`build_bos_model`, checked: encoding adds ``<s>`` before the text's own tokens."""
    from transformers import AutoTokenizer

    directory = build_bos_model(tmp_path_factory.mktemp("tiny-gpt2-bos"))
    tokenizer = AutoTokenizer.from_pretrained(directory)
    ids = tokenizer.encode("A text.")
    assert ids[0] == tokenizer.bos_token_id and ids[1:] == tokenizer("A text.", add_special_tokens=False).input_ids
    return directory


@pytest.fixture(scope="session")
def bos_table(bos_model, tmp_path_factory) -> Path:
    return build_table_for(bos_model, tmp_path_factory.mktemp("bos-table") / "bos.npz")


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory) -> Path:
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def bert_mlm(tmp_path_factory) -> Path:
    return build_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def roberta_mlm(tmp_path_factory) -> Path:
    return build_roberta(tmp_path_factory.mktemp("tiny-roberta"))


@pytest.fixture(scope="session")
def gguf_server_url():
    """lm-eval-pdd's completions server (``pdd_tasks.tools.gguf_server``) on the default model's GGUF,
    started once for the session (its counters only grow: tests read differences)."""
    from support.completions import correct_server

    with correct_server() as url:
        yield url


@pytest.fixture(scope="session", autouse=True)
def builtin_task_index_built_once():
    """lm-eval's ~14,000 task YAMLs indexed once for the session, not in every in-process run."""
    undo = in_process.cache_builtin_task_index()
    yield
    undo()


@pytest.fixture(scope="module")
def unlabelled_run(tiny_model, tiny_table, tmp_path_factory):
    """A ``pdd_custom`` run without labels (3 member texts as suspects, the 6 non-members as references),
    one per test module, for the tests of ``lm-eval-pdd decisions`` and of ``--force``."""
    folder = tmp_path_factory.mktemp("unlabelled")
    suspect = write_jsonl(folder / "s.jsonl", [{"text": t} for t in MEMBERS[:3]])
    reference = write_jsonl(folder / "r.jsonl", [{"text": t} for t in NON_MEMBERS])
    metadata = {"freq_table": str(tiny_table), "reference_files": str(reference)}
    lm_eval_custom(tiny_model, suspect, folder / "out", metadata, extra=["--log_samples"])
    return folder / "out"
