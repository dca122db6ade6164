"""The tiny models the tests build on the spot (GPT-2 without and with BOS, Llama, BERT and RoBERTa
masked LMs), their training, and their frequency tables; the fixtures of ``conftest.py`` build them
once per test run."""

from __future__ import annotations

from pathlib import Path

from .harness import wikimia_rows


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
