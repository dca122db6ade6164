"""How much DC-PDD depends on its reference frequency table: the same per-token log-probs, scored
with tables from different corpora (and from no corpus at all).

    python benchmarks/table_sensitivity.py [--limit N] [--controlled-dir DIR [--skip-wikimia]] [--a 0.01|none] [--json OUT.json]
        [--pile FILE] [--tables NAME ...]

Tables, all for the scored model's tokenizer (built here, into --work-dir, reused on reruns):

- ``pile-all``: the whole Pile test-split sample in ../shared/data/pile-test-sample (10,959 docs;
  ``--pile``: another ``.jsonl[.gz]`` file with ``text`` and ``domain`` fields); the reference every
  other table is compared with (for the default model its counts equal the shipped table's, which
  the script checks);
- ``pile-10%``: shard 0 of 10 of the same file (every 10th document, ``--shard-by document``);
- ``pile-<domain>``: one domain only (``--where domain=<domain>``; default ``github``, source code,
  a corpus mismatched with Wikipedia prose; ``--domain`` repeats);
- ``wordfreq-en``, ``wordfreq-zh``, ``jieba-zh``: estimates from word-frequency lists (the Chinese
  ones are mismatched for English texts; they are listed for completeness);
- ``uniform``: every count equal, i.e. f(v) = 1/|V| for every token (no calibration by frequency).

``--tables`` builds and compares only the tables it names (``pile-all``, the reference, always; the
word-list estimates take about 17 s each on one core).

Per-token log-probs are computed once per model with transformers directly (float32, each text scored
after the model's start token, BOS if set else EOS, as lm-eval's HF backend does for the pdd tasks)
and cached in --cache-dir, keyed by the model directory and the texts. Then, per table,
``pdd_metrics.dcpdd_score`` (a = 0.01 or ``--a``, first occurrences) gives every text's score, and the script
reports (1) Spearman's rank correlation of the scores with the ``pile-all`` scores, over all texts, and
(2) DC-PDD's AUC per table.

Texts: (1) every ``pdd_wikimia`` text (the four length splits, 1,650 texts; AUC per split) with the
default model; (2) with ``--controlled-dir DIR``, also ``DIR/data.jsonl`` (fields ``text``,
``label``, 1 = member) scored with the model in ``DIR/model`` (a transformers directory).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _common import add_json_option, refuse_existing_json


REPO = Path(__file__).resolve().parents[1]
PILE = REPO.parent / "shared" / "data" / "pile-test-sample" / "pile_test_sample.jsonl.gz"
WIKIMIA_DIR = REPO / "pdd_tasks" / "data" / "wikimia"
WIKIMIA_LENGTHS = (32, 64, 128, 256)


# ------------------------------------------------------------------------------ texts


@dataclass
class TextSet:
    name: str
    texts: list[str]
    labels: np.ndarray  # 1 = member
    groups: list[str]  # per text: the split it belongs to (AUC is computed per group)

    def digest(self) -> str:
        h = hashlib.sha256()
        for text in self.texts:
            h.update(text.encode("utf-8") + b"\0")
        return h.hexdigest()[:16]


def wikimia_texts(limit: int | None) -> TextSet:
    texts, labels, groups = [], [], []
    for length in WIKIMIA_LENGTHS:
        rows = [
            json.loads(line)
            for line in (WIKIMIA_DIR / f"WikiMIA_length{length}.jsonl").read_text(encoding="utf-8").splitlines()
        ]
        if limit is not None:
            rows = rows[:limit]
        texts += [row["input"] for row in rows]
        labels += [int(row["label"]) for row in rows]
        groups += [f"pdd_wikimia_{length}"] * len(rows)
    return TextSet("pdd_wikimia", texts, np.array(labels), groups)


def controlled_texts(directory: Path, limit: int | None) -> TextSet:
    path = directory / "data.jsonl"
    if not path.is_file() or not (directory / "model").is_dir():
        sys.exit(
            f"--controlled-dir {directory}: expected {path} and a transformers model directory {directory / 'model'}"
        )
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if limit is not None:
        rows = rows[:limit]
    for i, row in enumerate(rows, 1):
        if not isinstance(row.get("text"), str) or row.get("label") not in (0, 1):
            sys.exit(f"{path}:{i}: expected fields 'text' (string) and 'label' (0 or 1)")
    return TextSet(
        f"controlled ({directory.name})",
        [r["text"] for r in rows],
        np.array([r["label"] for r in rows]),
        ["controlled"] * len(rows),
    )


# --------------------------------------------------------------------------- log-probs


def token_logprobs(model_dir: Path, textset: TextSet, cache_dir: Path, batch_size: int = 8):
    """Per text: (token ids, log p_i) of the text's tokens scored after the start token. Cached."""
    key = hashlib.sha256(f"{model_dir.resolve()}|{textset.digest()}|{len(textset.texts)}".encode()).hexdigest()[:20]
    cache = cache_dir / f"logprobs_{key}.npz"
    if cache.is_file():
        with np.load(cache) as data:
            ids, lps, offsets = data["ids"], data["logprobs"], data["offsets"]
        print(f"log-probs: cached {cache}", file=sys.stderr)
        return [(ids[a:b], lps[a:b]) for a, b in zip(offsets[:-1], offsets[1:], strict=True)]

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()
    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    encoded = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in textset.texts]
    order = sorted(range(len(encoded)), key=lambda i: -len(encoded[i]))
    out: list = [None] * len(encoded)
    t0, done_tokens = time.perf_counter(), 0
    with torch.inference_mode():
        for b in range(0, len(order), batch_size):
            idx = order[b : b + batch_size]
            width = 1 + max(len(encoded[i]) for i in idx)
            inp = torch.zeros((len(idx), width), dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for row, i in enumerate(idx):
                seq = [start] + encoded[i]
                inp[row, : len(seq)] = torch.tensor(seq)
                mask[row, : len(seq)] = 1
            logits = model(input_ids=inp, attention_mask=mask).logits.float()
            logp = torch.log_softmax(logits[:, :-1], dim=-1)
            target = inp[:, 1:]
            picked = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
            for row, i in enumerate(idx):
                n = len(encoded[i])
                out[i] = (np.asarray(encoded[i], dtype=np.int64), picked[row, :n].numpy().astype(np.float32))
                done_tokens += n
            rate = done_tokens / (time.perf_counter() - t0)
            print(f"\rlog-probs: {b + len(idx)}/{len(order)} texts, {rate:.0f} tokens/s", end="", file=sys.stderr)
    print(file=sys.stderr)
    offsets = np.cumsum([0] + [len(ids) for ids, _ in out])
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp.npz")
    np.savez(
        tmp, ids=np.concatenate([i for i, _ in out]), logprobs=np.concatenate([lp for _, lp in out]), offsets=offsets
    )
    os.replace(tmp, cache)
    return out


# ------------------------------------------------------------------------------- tables

TABLE_NOTES = {
    "pile-all": "whole Pile test sample (the reference)",
    "pile-10%": "every 10th document of it (--num-shards 10 --shard-index 0 --shard-by document)",
    "wordfreq-en": "ESTIMATE from wordfreq's English list",
    "wordfreq-zh": "ESTIMATE from wordfreq's Chinese list (mismatched language)",
    "jieba-zh": "ESTIMATE from jieba's Chinese dictionary (mismatched language)",
    "uniform": "all counts equal: no calibration by frequency",
}


def build_tables(
    model_dir: Path, domains: list[str], cache_dir: Path, pile_file: Path = PILE, only: list[str] | None = None
) -> dict:
    """Every table of the comparison for the model's tokenizer (those of ``only`` and ``pile-all``
    where given), built once into ``cache_dir``."""
    from transformers import AutoTokenizer

    from pdd_tasks.freq.build import build
    from pdd_tasks.freq.estimates import estimate_table, jieba_word_counts, uniform_table, wordfreq_word_counts
    from pdd_tasks.freq.sources import local_sources
    from pdd_tasks.freq.tables import FrequencyTable, default_table_path, tokenizer_fingerprint

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    fingerprint = tokenizer_fingerprint(tokenizer)
    where = cache_dir / f"tables_{fingerprint[:16]}"
    if pile_file != PILE:  # another corpus: other tables
        where = where.with_name(f"{where.name}_{hashlib.sha256(str(pile_file.resolve()).encode()).hexdigest()[:8]}")
    where.mkdir(parents=True, exist_ok=True)
    if not pile_file.is_file():
        sys.exit(f"needs the Pile sample at {pile_file}")
    pile = local_sources([pile_file])

    def estimate(pairs_and_description, language):
        pairs, description = pairs_and_description
        return estimate_table(pairs, tokenizer, description, language=language)

    recipes = {
        "pile-all": lambda: build(pile, tokenizer, progress=False),
        "pile-10%": lambda: build(pile, tokenizer, progress=False, shard_index=0, num_shards=10, shard_by="document"),
        **{
            f"pile-{d}": (
                lambda d=d: build(local_sources([pile_file], where=(("domain", d),)), tokenizer, progress=False)
            )
            for d in domains
        },
        "wordfreq-en": lambda: estimate(wordfreq_word_counts("en"), "en"),
        "wordfreq-zh": lambda: estimate(wordfreq_word_counts("zh"), "zh"),
        "jieba-zh": lambda: estimate(jieba_word_counts(), "zh"),
        "uniform": lambda: uniform_table(tokenizer),
    }
    unknown = sorted(set(only or []) - set(recipes))
    if unknown:
        sys.exit(f"--tables {' '.join(unknown)}: no such table; choose from {', '.join(recipes)}")
    tables = {}
    for name, make in recipes.items():
        if only and name != "pile-all" and name not in only:
            continue
        path = where / f"{name.replace('%', 'pct')}.npz"
        if path.is_file():
            tables[name] = FrequencyTable.load(path)
            continue
        start = time.perf_counter()
        tables[name] = make()
        tables[name].save(path)
        print(
            f"table {name}: {tables[name].total_tokens:,} tokens, {time.perf_counter() - start:.0f} s", file=sys.stderr
        )
    shipped = FrequencyTable.load(default_table_path())
    same = shipped.tokenizer_fingerprint == fingerprint and np.array_equal(shipped.counts, tables["pile-all"].counts)
    return {"tables": tables, "pile_all_equals_shipped": bool(same), "fingerprint": fingerprint}


# ---------------------------------------------------------------------------- scoring


def evaluate(textset: TextSet, logprobs: list, tables: dict, vocab_size: int, a: float = 0.01) -> dict:
    from scipy.stats import spearmanr

    from pdd_metrics import dcpdd_score
    from pdd_metrics.evaluation import roc_auc

    groups = sorted(set(textset.groups), key=textset.groups.index)
    scores = {}
    for name, table in tables.items():
        log_f = table.log_frequencies(vocab_size)
        scores[name] = np.array([dcpdd_score(lp, ids, log_f, a=a) for ids, lp in logprobs])
    reference = scores["pile-all"]
    group_index = np.array(textset.groups)
    rows = {}
    for name, values in scores.items():
        rho = spearmanr(values, reference).statistic
        auc = {}
        for group in groups:
            mask = group_index == group
            try:
                auc[group] = roc_auc(values[mask], textset.labels[mask])
            except ValueError:  # one class (a small --limit)
                auc[group] = float("nan")
        rows[name] = {
            "spearman_vs_pile_all": float(rho),
            "spearman_per_group": {
                g: float(spearmanr(values[group_index == g], reference[group_index == g]).statistic) for g in groups
            },
            "auc": auc,
            "counts_from": tables[name].counts_from,
            "total_tokens": int(tables[name].total_tokens),
            "coverage": float(tables[name].coverage),
        }
    return {"texts": len(textset.texts), "groups": {g: int((group_index == g).sum()) for g in groups}, "rows": rows}


def markdown(title: str, result: dict) -> str:
    groups = list(result["groups"])
    head = (
        "| table | counts from | tokens | coverage | Spearman vs pile-all | "
        + " | ".join(f"AUC {g}" for g in groups)
        + " |"
    )
    lines = [
        f"**{title}** ({result['texts']} texts: " + ", ".join(f"{g} {n}" for g, n in result["groups"].items()) + ")",
        "",
        head,
        "|" + "---|" * (5 + len(groups)),
    ]
    for name, row in result["rows"].items():
        lines.append(
            f"| {name} | {row['counts_from']} | {row['total_tokens']:,} | {row['coverage']:.1%} | {row['spearman_vs_pile_all']:.3f} | "
            + " | ".join(f"{row['auc'][g]:.3f}" for g in groups)
            + " |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--limit", type=int, default=None, help="first N texts of each WikiMIA split (and of the controlled data)"
    )
    parser.add_argument(
        "--controlled-dir", type=Path, default=None, help="DIR/model (transformers) and DIR/data.jsonl (text, label)"
    )
    parser.add_argument("--skip-wikimia", action="store_true", help="only the controlled benchmark")
    parser.add_argument(
        "--domain", action="append", default=None, help="single-domain table(s) of the Pile sample (default: github)"
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=Path("/tmp/lm_eval_pdd_table_sensitivity"),
        help="log-probs and tables are kept here",
    )
    parser.add_argument(
        "--pile", type=Path, default=PILE, help="the corpus of the pile-* tables (default: the Pile sample)"
    )
    parser.add_argument("--tables", nargs="+", default=None, help="only these tables, and pile-all (default: all)")
    parser.add_argument("--logprobs-only", action="store_true")
    parser.add_argument("--batch-size", type=int, default=8)
    add_json_option(parser, "also write every number here")
    parser.add_argument(
        "--a",
        default="0.01",
        help="DC-PDD's cap a (Eq. 7; default 0.01); 'none' = no cap (the paper's CLD ablation, over first occurrences)",
    )
    args = parser.parse_args()
    refuse_existing_json(args)

    from transformers import AutoConfig

    from pdd_tasks.tools.default_model import ensure_default_model

    domains = args.domain or ["github"]
    runs = []
    if not args.skip_wikimia:
        runs.append((ensure_default_model(), wikimia_texts(args.limit)))
    if args.controlled_dir is not None:
        runs.append((args.controlled_dir / "model", controlled_texts(args.controlled_dir, args.limit)))
    output = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "runs": {},
    }
    for model_dir, textset in runs:
        logprobs = token_logprobs(Path(model_dir), textset, args.cache_dir, args.batch_size)
        if args.logprobs_only:
            continue
        built = build_tables(Path(model_dir), domains, args.cache_dir, args.pile, args.tables)
        vocab_size = AutoConfig.from_pretrained(model_dir).vocab_size
        cap = None if args.a.lower() == "none" else float(args.a)
        result = evaluate(textset, logprobs, built["tables"], vocab_size, a=cap)
        result["a"] = cap
        result["model"] = str(model_dir)
        result["pile_all_equals_shipped_table"] = built["pile_all_equals_shipped"]
        output["runs"][textset.name] = result
        print(markdown(f"{textset.name}, model {model_dir}, DC-PDD a = {cap}", result))
        print(f"\npile-all table counts equal the shipped table's: {built['pile_all_equals_shipped']}\n")
    if args.json is not None:
        args.json.write_text(json.dumps(output, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
