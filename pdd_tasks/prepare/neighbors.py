"""Neighbour texts for the Neighbor attack (Mattern et al., ACL Findings 2023, Sec. 3.2), from a
masked language model.

A neighbour of a text is the text with one word (or ``words`` words) replaced by a word the masked
LM finds likely in its place. As in the paper and the authors' code (also mimir's BERT neighbours):

1. The text is tokenized by the masked LM's tokenizer. For each token that is a whole word of the
   text (a maximal run of word characters, ``\\w+``), the masked LM sees the text with **dropout
   on that token's input embedding** (p = 0.7, kept values scaled by 1/(1 - p)) instead of a mask
   token, so that it proposes replacements close to the original word (the paper follows Zhou et
   al. 2019's lexical substitution here).
2. The 5 most likely whole-word tokens other than the original are the candidates at that
   position, each scored ``p(candidate) / (1 - p(original))`` (the paper's normalisation).
3. The neighbours are the ``count`` highest-scored single replacements over all positions; with
   ``words`` > 1, the ``count`` highest-scored sets of ``words`` replacements at distinct positions,
   a set scored by the product of its replacements' scores.
4. A replacement is written into the original text in place of the word's characters (its case
   follows the original word's first letters), so that everything else, whitespace included, is
   the text's own.

Where this differs from the authors' code: the dropout is applied to the word embedding the masked
LM takes as ``inputs_embeds`` (their code applies it to the output of BERT's whole embedding layer,
word + position + type embeddings after layer norm, and passes that as ``inputs_embeds``, so BERT
adds the position embeddings twice); candidates are restricted to whole words replacing whole
words (their code replaces any word piece, ``##`` pieces and punctuation included, and decodes the
whole sequence, which for an uncased model lowercases the text); the case transfer of step 4.

Determinism: the dropout masks of a text come from a generator seeded by ``(seed, text)`` (SHA-256),
each text is run on its own in batches whose size depends only on its length, and ties are broken
by position and token id, so the same text, settings and masked LM on the same device give the same
neighbours whatever the order or number of the texts of a run.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from pdd_tasks.errors import UserError


logger = logging.getLogger(__name__)

#: Dropout probability on the replaced word's input embedding (Mattern et al. 2023, Sec. 3.2; the
#: authors' code and mimir use 0.7).
EMBEDDING_DROPOUT = 0.7
#: Candidate replacements kept per position (the authors' code: the top 6 tokens less the original).
CANDIDATES_PER_POSITION = 5
#: Tokens per masked-LM forward pass: a text of L tokens is run as batches of max(1, 4096 // L)
#: copies (one per replaced position), a size that depends on the text alone (determinism).
TOKENS_PER_BATCH = 4096

_WORD = re.compile(r"\w+")


class MaskedLMError(UserError):
    """The masked LM named by the ``neighbor_model`` setting cannot be loaded or used."""


def _match_case(replacement: str, original: str) -> str:
    """``replacement`` with the case pattern of ``original`` (an uncased masked LM proposes lowercase words).

    >>> _match_case("london", "Paris"), _match_case("usa", "UK"), _match_case("Bonn", "city")
    ('London', 'USA', 'Bonn')
    """
    if original.isupper() and len(original) > 1:
        return replacement.upper()
    if original[:1].isupper() and replacement[:1].islower():
        return replacement[:1].upper() + replacement[1:]
    return replacement


@dataclass(frozen=True)
class Candidate:
    """One replacement: the word at ``text[start:end]`` (masked-LM position ``position``) by ``word``."""

    position: int
    token_id: int
    score: float
    start: int
    end: int
    word: str


def splice(text: str, replacements: tuple[Candidate, ...]) -> str:
    """``text`` with each replacement's span ``[start, end)`` replaced by its word (spans disjoint).

    >>> splice("The cat sat.", (Candidate(2, 9, 1.0, 8, 11, "lay"), Candidate(1, 7, 1.0, 4, 7, "dog")))
    'The dog lay.'
    """
    pieces, last = [], 0
    for candidate in sorted(replacements, key=lambda c: c.start):
        pieces += [text[last : candidate.start], _match_case(candidate.word, text[candidate.start : candidate.end])]
        last = candidate.end
    return "".join(pieces) + text[last:]


def best_sets(candidates: list[Candidate], count: int, words: int) -> list[tuple[Candidate, ...]]:
    """The ``count`` highest-scored sets of ``words`` candidates at distinct positions, best first; a
    set's score is the product of its candidates' scores; ties go to the earlier positions and
    lower token ids.

    Only the best ``count + (words - 1) * CANDIDATES_PER_POSITION + words`` single candidates can be
    part of a best set (a candidate ranked lower is beaten by at least ``count`` sets that swap it
    for a better one at a free position), so only those are combined.

    >>> c = [Candidate(p, t, s, 0, 0, "") for p, t, s in [(1, 5, 4.0), (1, 6, 3.0), (2, 7, 2.0)]]
    >>> [[(x.position, x.token_id) for x in s] for s in best_sets(c, 2, 2)]
    [[(1, 5), (2, 7)], [(1, 6), (2, 7)]]
    """
    ranked = sorted(candidates, key=lambda c: (-c.score, c.position, c.token_id))
    if words == 1:
        return [(c,) for c in ranked[:count]]
    ranked = ranked[: count + (words - 1) * CANDIDATES_PER_POSITION + words]
    sets = [
        combo
        for combo in itertools.combinations(ranked, words)
        if len({c.position for c in combo}) == words and all(c.score > 0 for c in combo)
    ]
    sets.sort(key=lambda combo: (-sum(math.log(c.score) for c in combo), [(c.position, c.token_id) for c in combo]))
    return [tuple(sorted(combo, key=lambda c: c.position)) for combo in sets[:count]]


def _text_seed(seed: int, text: str) -> int:
    digest = hashlib.sha256(f"{seed}\0{text}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


@functools.lru_cache(maxsize=2)
def load_masked_lm(name: str, device: str):
    """The masked LM ``name`` (hub id or local directory) and its fast tokenizer, in eval mode on
    ``device``, float32; loaded once per process. A failure is a :class:`MaskedLMError` naming the fix."""
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    local = Path(name).expanduser()
    source = str(local) if local.exists() else name  # "~/models/roberta-base" in --metadata
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForMaskedLM.from_pretrained(source, dtype=torch.float32)
    except Exception as error:  # OSError (not found, offline), ValueError (not a masked LM), ...
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        where = (
            f"the directory {name} exists but holds no masked LM with its tokenizer"
            if Path(name).expanduser().is_dir()
            else f"{name!r} is no local directory, and as a Hugging Face Hub id it could not be loaded"
        )
        raise MaskedLMError(
            f"metadata neighbor_model={name!r}: could not load a masked language model (AutoModelForMaskedLM) "
            f"and its tokenizer: {where} ({type(error).__name__}: {reason}). Name a masked LM, e.g. "
            f"roberta-base or bert-base-uncased (from the Hub, online), or a local directory with its config, "
            f"weights and tokenizer (save_pretrained, or `huggingface-cli download roberta-base --local-dir DIR` on a "
            f"machine online): offline (HF_HUB_OFFLINE=1) only a local directory works."
        ) from None
    if not tokenizer.is_fast:
        raise MaskedLMError(
            f"metadata neighbor_model={name!r}: its tokenizer is a slow (Python) tokenizer without character "
            f"offsets, which the Neighbor attack needs to replace words in place; save the model with a fast "
            f"tokenizer (tokenizer.json), e.g. AutoTokenizer.from_pretrained(..., use_fast=True).save_pretrained(DIR)."
        )
    model.to(device).eval()
    return model, tokenizer


def _vocabulary_words(tokenizer, size: int) -> tuple[list[str], list[bool], list[bool]]:
    """Per token id < ``size``: the text it adds after a word, whether that starts a new word, whether
    it is a whole word (word characters only, after its leading whitespace; ids the tokenizer does
    not have are none)."""
    vocabulary = min(len(tokenizer), size)
    special = set(tokenizer.all_special_ids)
    anchor = [0]  # a token that is a word on its own, to decode each token after
    for word in ("a", "the", "I", "x", "1", "de"):
        ids = tokenizer(word, add_special_tokens=False).input_ids
        if len(ids) == 1 and ids[0] not in special and tokenizer.decode(ids).strip() == word:
            anchor = ids
            break
    head = tokenizer.decode(anchor, clean_up_tokenization_spaces=False)
    decoded = tokenizer.batch_decode([anchor + [i] for i in range(vocabulary)], clean_up_tokenization_spaces=False)
    pieces, starts, whole = [], [], []
    for token_id, text in enumerate(decoded):
        piece = text[len(head) :] if text.startswith(head) else ""
        pieces.append(piece.strip())
        starts.append(piece[:1].isspace())
        whole.append(token_id not in special and _WORD.fullmatch(piece.strip()) is not None)
    missing = size - vocabulary
    return pieces + [""] * missing, starts + [False] * missing, whole + [False] * missing


@dataclass
class NeighborGenerator:
    """Makes and caches the neighbours of texts with one masked LM and one set of settings.

    Attributes:
        name: the masked LM (hub id or local directory).
        count: neighbours per text (fewer where the text has fewer replacements to offer).
        words: words replaced per neighbour.
        seed: seed of the dropout masks.
        device: where the masked LM runs.
    """

    name: str
    count: int
    words: int = 1
    seed: int = 0
    device: str = "cpu"
    _cache: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        import torch

        self.model, self.tokenizer = load_masked_lm(self.name, self.device)
        size = self.model.get_output_embeddings().weight.shape[0]
        pieces, starts, whole = _vocabulary_words(self.tokenizer, size)
        self._pieces = pieces
        whole_t, starts_t = torch.tensor(whole), torch.tensor(starts)
        # Allowed replacements of a word token that starts with whitespace, and of one that does not
        # (the first word of a text, for byte-level BPE tokenizers).
        self._allowed = {True: (whole_t & starts_t).to(self.device), False: (whole_t & ~starts_t).to(self.device)}
        self._starts = starts
        limits = [self.tokenizer.model_max_length, getattr(self.model.config, "max_position_embeddings", 512)]
        self._max_length = int(min(limit for limit in limits if limit))

    def neighbors(self, text: str) -> tuple[str, ...]:
        """The neighbours of ``text`` (cached), best first."""
        if text not in self._cache:
            self._cache[text] = self._generate(text)
        return self._cache[text]

    def _targets(self, text: str):
        """The masked LM's token ids of ``text`` and the positions that are whole words, with their spans."""
        encoded = self.tokenizer(
            text,
            truncation=True,
            max_length=self._max_length,
            return_offsets_mapping=True,
            return_special_tokens_mask=True,
        )
        ids, targets = encoded["input_ids"], []
        for position, ((start, end), special) in enumerate(
            zip(encoded["offset_mapping"], encoded["special_tokens_mask"], strict=True)
        ):
            span = text[start:end]
            start, end = start + len(span) - len(span.lstrip()), end - len(span) + len(span.rstrip())
            whole_word = (
                special == 0
                and end > start
                and _WORD.fullmatch(text[start:end]) is not None
                and (start == 0 or not _WORD.match(text[start - 1]))
                and (end == len(text) or not _WORD.match(text[end]))
            )
            if whole_word:
                targets.append((position, start, end))
        return ids, targets

    def candidates(self, text: str) -> list[Candidate]:
        """Every candidate replacement of every whole word of ``text`` (step 1-2 of the module doc)."""
        import torch

        ids, targets = self._targets(text)
        if not targets:
            return []
        generator = torch.Generator().manual_seed(_text_seed(self.seed, text))
        embeddings = self.model.get_input_embeddings()
        hidden = embeddings.weight.shape[1]
        keep = torch.rand(len(targets), hidden, generator=generator) >= EMBEDDING_DROPOUT
        scale = keep.to(torch.float32) / (1.0 - EMBEDDING_DROPOUT)
        input_ids = torch.tensor([ids], device=self.device)
        batch = max(1, TOKENS_PER_BATCH // len(ids))
        found: list[Candidate] = []
        with torch.no_grad():
            base = embeddings(input_ids)[0]
            for first in range(0, len(targets), batch):
                chunk = targets[first : first + batch]
                positions = torch.tensor([p for p, _, _ in chunk], device=self.device)
                rows = torch.arange(len(chunk), device=self.device)
                embeds = base.unsqueeze(0).repeat(len(chunk), 1, 1)
                embeds[rows, positions] = embeds[rows, positions] * scale[first : first + len(chunk)].to(self.device)
                probs = torch.softmax(self._logits_at(embeds, positions).float(), dim=-1)
                originals = torch.tensor([ids[p] for p, _, _ in chunk], device=self.device)
                original_probs = probs[rows, originals]
                for row, (position, start, end) in enumerate(chunk):
                    allowed = self._allowed[self._starts[ids[position]]].clone()
                    allowed[ids[position]] = False
                    masked = torch.where(allowed, probs[row], torch.full_like(probs[row], -1.0))
                    top_probs, top_ids = torch.topk(masked, CANDIDATES_PER_POSITION)
                    denominator = max(1.0 - float(original_probs[row]), 1e-6)
                    for prob, token_id in zip(top_probs.tolist(), top_ids.tolist(), strict=True):
                        word = self._pieces[token_id]
                        if prob > 0 and _match_case(word, text[start:end]) != text[start:end]:
                            found.append(Candidate(position, token_id, prob / denominator, start, end, word))
        return found

    def _logits_at(self, embeds, positions):
        """The masked LM's logits at one position per row: the head runs on those positions alone
        where the model is ``base_model`` then a head (BERT, RoBERTa, DistilBERT, ...), else all logits
        are computed and the positions taken from them."""
        import torch

        rows = torch.arange(len(positions), device=positions.device)

        def keep_positions(module, args, output):
            if getattr(output, "last_hidden_state", None) is not None:  # else all logits, gathered below
                output.last_hidden_state = output.last_hidden_state[rows, positions].unsqueeze(1)
            return output

        handle = None
        base = getattr(self.model, "base_model", None)
        if base is not None and base is not self.model:
            handle = base.register_forward_hook(keep_positions)
        try:
            logits = self.model(
                inputs_embeds=embeds, attention_mask=torch.ones(embeds.shape[:2], device=embeds.device)
            ).logits
        finally:
            if handle is not None:
                handle.remove()
        return logits[:, 0] if logits.shape[1] == 1 else logits[rows, positions]

    def _generate(self, text: str) -> tuple[str, ...]:
        chosen = best_sets(self.candidates(text), self.count, self.words)
        neighbors = tuple(dict.fromkeys(splice(text, replacements) for replacements in chosen))
        if not neighbors:
            raise MaskedLMError(
                f"Neighbor: the masked LM {self.name} found no word of this text to replace "
                f"(neighbor_words={self.words}): {text[:80]!r}. The Neighbor attack needs texts with at least "
                f"{self.words} word(s) that the masked LM's tokenizer keeps whole; drop the method "
                f"(unset neighbor_model) or such texts."
            )
        if len(neighbors) < self.count:
            logger.info("Neighbor: %d of %d neighbours for a short text: %r", len(neighbors), self.count, text[:60])
        return neighbors


def prepare(task, settings) -> NeighborGenerator:
    """The registry's ``prepare`` hook of Neighbor (once per run): the generator of the settings in effect."""
    import torch

    return NeighborGenerator(
        name=settings.neighbor_model,
        count=settings.neighbor_count,
        words=settings.neighbor_words,
        seed=settings.neighbor_seed,
        device="cuda" if torch.cuda.is_available() else "cpu",
    )
