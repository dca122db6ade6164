"""Shared fixtures: a tiny GPT-2 and tokenizer built on the spot, a reference table for it, and a
runner for the real ``lm_eval`` command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pdd_tasks.loading.files import read_json, read_jsonl
from pdd_tasks.tools.cli import tasks_path  # noqa: F401  (re-exported for the test modules)


REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
WIKIMIA32 = REPO / "pdd_tasks" / "data" / "wikimia" / "WikiMIA_length32.jsonl"


def wikimia_rows(length: int = 32) -> list[dict]:
    return read_jsonl(REPO / "pdd_tasks" / "data" / "wikimia" / f"WikiMIA_length{length}.jsonl")


def build_tiny_model(directory: Path, n_positions: int = 256, seed: int = 0) -> Path:
    """A 2-layer GPT-2 with a byte-level BPE trained on WikiMIA texts, saved the way users save."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    texts = [row["input"] for length in (32, 64) for row in wikimia_rows(length)]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=1024, min_frequency=2, special_tokens=["<|endoftext|>"])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=n_positions,
        n_embd=64,
        n_layer=2,
        n_head=2,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    model = GPT2LMHeadModel(config)
    model.save_pretrained(directory)
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


#: lm-eval's command line with the pdd backends registered (``--model hf-pdd``).
PDD_BACKENDS_CLI = [sys.executable, "-m", "pdd_tasks.backends"]


def run_lm_eval(
    args: list[str], cwd: Path, check: bool = True, command: list[str] | None = None
) -> subprocess.CompletedProcess:
    """Run the real ``lm_eval`` console script of this environment (or ``command``, e.g.
    :data:`PDD_BACKENDS_CLI`)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    command = command or [str(Path(sys.executable).with_name("lm_eval"))]
    process = subprocess.run([*command, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if check and process.returncode != 0:
        raise AssertionError(
            f"lm_eval failed ({process.returncode}):\n{process.stdout[-4000:]}\n{process.stderr[-8000:]}"
        )
    return process


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
