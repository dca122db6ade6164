"""Level and power of the contamination tests on benchmark-shaped data (issue 20, item 4).

The default model (SmolLM2-135M-Instruct, float32, CPU) and two benchmark shapes, each rendered as
the stock ``arc_easy`` / ``gsm8k`` prompts render an example with its answer
(``Question: ...\nAnswer: <the correct choice or the worked answer>``):

- ``--rows sentences`` (default): rows built from real sentences, WikiMIA-24's non-members (Wikipedia
  leads on events of March-December 2024, each about another event; ``--sentences``, the shared data's
  folder, absent in a fresh clone), each cut to its first ``--words`` words. Multiple choice
  (:func:`cloze_rows`, ARC-shaped): ``Which word fills the blank in "<sentence with ____>"?``, the blanked
  word among 3 words of other sentences. Free answer (:func:`capitals_rows`, GSM8K-shaped): ``How many
  words of "<sentence>" begin with a capital letter?``, answered by listing them, ``#### <count>``.
  Only the question's frame is templated; the sentences and so most of each row differ;
- ``--rows pile``: the same rows from the first ``--words`` words of the Pile test sample's prose
  documents (``--pile``; web pages, Common Crawl, PubMed and NIH abstracts: :data:`PILE_PROSE`, about
  4,000 texts), for files of more examples than WikiMIA-24's 779 texts allow (1,000, CoDeC's default);
- ``--rows templated``: the generators of ``tests/support/standard_tasks.py`` (rows that differ only in
  names and numbers; there one in-context example makes every row more likely, seen or not, and CoDeC
  scores 0).

Per shape:

- **power**: ``lm-eval-pdd make-ordered``'s fine-tuning (:func:`pdd_tasks.tools.builders.ordered.make_ordered`,
  ``--data`` the file: blocks of 8 consecutive examples, AdamW at ``--learning-rate``, ``--train-batch``
  blocks a step) on the file's ``--examples`` rows in their order, the models of ``--epochs`` in one
  sequence: the model of k epochs is the model of the previous number tuned for the epochs between
  (AdamW's state starts afresh there, the batch order is drawn again); both tests on the file (positive
  control), the exchangeability test also on the shuffled copy after the most epochs (negative control:
  an order never seen);
- **level** (untouched data): the untuned model on ``--level-seeds`` files of ``--examples`` rows, each
  drawn with another seed: ``pdd_codec`` and ``pdd_exchangeability`` on each file;
- **PTDI** (unless ``--no-ptdi``): labelled ``pdd_custom`` on the file's rows (members: the texts
  trained on) and ``--held-out`` other rows of the same shape (never trained on), every text scored
  once per model; then, per draw, the held-out rows are split at random into ``--unseen-suspects``
  suspects and the rest as references, and each method's identification is computed as ``pdd_custom``
  computes it (:func:`pdd_metrics.identify_members`, Benjamini-Hochberg at ``--target-fdr``): the
  realised FDR (mean false-discovery proportion) and power over ``--ptdi-draws`` draws. On the untuned
  model the file's rows are unseen too, so every identification is false: that row is PTDI's level.

Besides (``--diverse-files N``): CoDeC's level on untouched data of varied content, ``pdd_codec`` with
the untuned model on N files of ``--examples`` documents of the Pile's test split (``--pile``, the
shared data's pile-test-sample: 17 domains, from code to e-mail), each cut to ``--diverse-words``
words: how often its binomial p-value rejects alone, and at the alpha/2 the rule asks of it where the
exchangeability test does not reject.

**Exposure controls** (``--exposure ordered|shuffled|examples``, issue 33): instead of the runs above,
per shape and per tuning seed (``--tuning-seeds``; seed s draws its own file of ``--examples`` rows and
its own batch order), the untuned model on the file (the level on untouched data), then the model
tuned on the file as ``--exposure`` says (:func:`pdd_tasks.tools.builders.ordered.training_texts`: each
example its own training text, or blocks of 8 in the file's or a random order; ``--train-batch``
training texts a step, the models of ``--epochs`` in one sequence as above) on the file and on
``--unseen-files`` other files of the same shape it never saw (the in-distribution case: a model
tuned on a benchmark's train split, checked on its test split): both tests on each. With ``--tune-on
all`` the model is tuned on the file and those other files together instead (the same files, every one
seen; an epoch sees each example once, so each file gets the steps ``--tune-on one`` gives its file),
and both tests run on each file: a group all of whose files were seen (``group_level.py --controls``).
``--json`` then holds ``{"summary", "runs"}`` of this mode (``--table-from`` prints its table); the
summary has, per shape, each test's rejection rate at alpha = 0.05 alone and the scores, the highest
CoDeC score measured on unseen data of the shape included (what :mod:`pdd_metrics.verdict`
calibrates CoDeC's null with).

The decision rules are the verdict's (``lm-eval-pdd table``; :func:`pdd_metrics.verdict.decide`):
each test's p-value (exchangeability: Oren et al.'s t-test; CoDeC: the one-sided binomial test of
its score against the calibrated null, :func:`pdd_metrics.verdict.codec_calibrated_pvalue`; the
test against 1/2, :func:`pdd_metrics.codec.codec_pvalue`, is recorded too), Holm-adjusted over the
two tests of the file, each test "flags" at adjusted p <= 0.05, and either flag is "contaminated"
(the summary's ``both`` key of the runs without ``--exposure`` is that verdict's share; its name is
from the rule before issue 33, which needed both). The scoring runs through ``lm_eval.simple_evaluate`` (the
harness's Python entry point; this checkout's task configs only, which a local file needs).

    OMP_NUM_THREADS=1 python benchmarks/contamination_controls.py --workdir /tmp/contamination-controls \\
        --json benchmarks/results/contamination_controls.json \\
        --package-data pdd_tasks/data/contamination_controls.json

Writes the JSON (every number, the sizes, the machine, the load), the package's data file (the
summary the verdict reads) and prints the Markdown table; a JSON file that holds other shapes keeps
them (``--shapes`` runs some shapes, none with ``--shapes`` alone; ``--merge OTHER.json`` adds the
shapes of another run's file; ``--table-from`` prints the table of a file). The measured table, its
commands and sizes: docs/controls-examples.md ("Each kind of exposure: what each test sees").
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
from _common import add_json_option, machine, recorded_command, refuse_existing_json
from ptdi_fdr import measure


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support.standard_tasks import arc_rows, gsm8k_rows  # noqa: E402

from pdd_metrics.codec import codec_pvalue  # noqa: E402
from pdd_metrics.verdict import (  # noqa: E402
    ALPHA,
    CODEC_NULL_SCORE,
    Evidence,
    codec_calibrated_pvalue,
    codec_evidence,
    codec_reference_pvalue,
    decide,
)
from pdd_tasks.tools import arg_types  # noqa: E402
from pdd_tasks.tools.report.tables import EXPOSURE_KEYS  # noqa: E402


#: shape -> (the stock task it stands for, its templated row maker, the seed of the file tuned on)
SHAPES = {
    "multiple_choice": ("arc_easy", arc_rows, 101),
    "free_answer": ("gsm8k", gsm8k_rows, 102),
}

#: The shared data of this machine (absent in a fresh clone: ``--rows templated`` needs none of it).
SHARED_DATA = REPO.parent / "shared" / "data"
_PUNCTUATION = ".,;:()[]'\"!?"
_CLOZE_WORD = re.compile(r"[A-Za-z]{5,}")


#: This script, as a recorded command names it.
SCRIPT = "contamination_controls.py"


def unseen_texts(folder: Path) -> list[str]:
    """WikiMIA-24's non-members (label 0) of length 32 (``folder``/WikiMIA_length32.jsonl): the first 32
    words of Wikipedia leads on events of March-December 2024, 779 texts, each about another event."""
    path = folder / "WikiMIA_length32.jsonl"
    if not path.is_file():
        raise SystemExit(
            f"{path}: not found. --sentences names the folder of WikiMIA-24 (../shared/data/WikiMIA-24, see its "
            "PROVENANCE.md); --rows templated uses the generators of tests/support/standard_tasks.py instead."
        )
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [row["input"] for row in rows if row["label"] == 0]


def cloze_rows(texts: list[str], n: int, seed: int) -> list[dict]:
    """``n`` ARC-shaped rows (``question``, ``choices: {text, label}``, ``answerKey``) from real
    sentences: each a text of ``texts`` (drawn with ``seed``) with one word of 5 or more letters blanked,
    the blanked word among 3 such words of other texts."""
    rng = random.Random(seed)
    chosen = rng.sample(texts, min(n, len(texts)))
    vocabulary = sorted({w.strip(_PUNCTUATION) for t in chosen for w in t.split()} - {""})
    vocabulary = [w for w in vocabulary if _CLOZE_WORD.fullmatch(w)]
    rows = []
    for index, text in enumerate(chosen):
        words = text.split()
        candidates = [i for i, w in enumerate(words) if _CLOZE_WORD.fullmatch(w.strip(_PUNCTUATION))]
        if not candidates:
            continue
        blank = rng.choice(candidates)
        answer = words[blank].strip(_PUNCTUATION)
        words[blank] = words[blank].replace(answer, "____")
        options = [answer, *rng.sample([w for w in vocabulary if w.lower() != answer.lower()], 3)]
        rng.shuffle(options)
        labels = ["A", "B", "C", "D"]
        rows.append(
            {
                "id": f"cloze-{seed}-{index}",
                "source": text,
                "question": f'Which word fills the blank in "{" ".join(words)}"?',
                "choices": {"text": options, "label": labels},
                "answerKey": labels[options.index(answer)],
            }
        )
    return rows


def capitals_rows(texts: list[str], n: int, seed: int) -> list[dict]:
    """``n`` GSM8K-shaped rows (``question``, ``answer`` with its working and ``#### <number>``) from
    real sentences: how many words of a text of ``texts`` (drawn with ``seed``) begin with a capital
    letter, answered by listing them."""
    rng = random.Random(seed)
    rows = []
    for text in rng.sample(texts, min(n, len(texts))):
        capitals = [w for w in (w.strip(_PUNCTUATION) for w in text.split()) if w[:1].isupper()]
        rows.append(
            {
                "source": text,
                "question": f'How many words of "{text}" begin with a capital letter?',
                "answer": f"{', '.join(capitals)}: {len(capitals)} words.\n#### {len(capitals)}",
            }
        )
    return rows


#: The Pile test sample's domains of running prose (``--rows pile``), 1,000 documents each.
PILE_PROSE = ("openwebtext2", "pile_cc", "pubmed_abstracts", "nih_exporter")


def pile_documents(path: Path) -> list[dict]:
    """The Pile test sample's documents (``path``: pile-test-sample's gzip JSONL, ``text`` and ``domain``)."""
    if not path.is_file():
        raise SystemExit(f"{path}: not found; --pile names ../shared/data/pile-test-sample's file (its PROVENANCE.md).")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def pile_sentences(path: Path, words: int) -> list[str]:
    """The first ``words`` words of each document of :data:`PILE_PROSE` in the Pile test sample
    (``path``) that has at least that many, each once, in the file's order."""
    cut = [" ".join(d["text"].split()[:words]) for d in pile_documents(path) if d["domain"] in PILE_PROSE]
    return list(dict.fromkeys(text for text in cut if len(text.split()) == words))


def rows_label(args) -> str:
    """What the rows were built from, for the JSON's settings."""
    if args.rows == "templated":
        return "templated"
    source = "the Pile test sample's prose" if args.rows == "pile" else "WikiMIA-24's non-members"
    return f"sentences ({source}), first {args.words} words"


def row_makers(args) -> dict:
    """shape -> ``make(n, seed)``: the rows of a file (``--rows``: real sentences or the templated ones)."""
    if args.rows == "templated":
        return {shape: SHAPES[shape][1] for shape in SHAPES}
    if args.rows == "pile":
        texts = pile_sentences(args.pile, args.words)
    else:
        texts = [" ".join(text.split()[: args.words]) for text in unseen_texts(args.sentences)]
    return {
        "multiple_choice": lambda n, seed: cloze_rows(texts, n, seed),
        "free_answer": lambda n, seed: capitals_rows(texts, n, seed),
    }


def diverse_texts(path: Path, n: int, seed: int, words: int) -> list[str]:
    """``n`` documents of the Pile's test split (``path``: pile-test-sample, 17 domains), drawn with
    ``seed`` from those of at least ``words`` words, each cut to its first ``words`` words."""
    documents = [d["text"].split() for d in pile_documents(path)]
    long_enough = [d for d in documents if len(d) >= words]
    return [" ".join(d[:words]) for d in random.Random(seed).sample(long_enough, n)]


def render(shape: str, row: dict) -> str:
    """An example as the stock task prompts it, followed by its answer (``doc_to_text`` + target)."""
    if shape == "multiple_choice":
        answer = row["choices"]["text"][row["choices"]["label"].index(row["answerKey"])]
        return f"Question: {row['question']}\nAnswer: {answer}"
    return f"Question: {row['question']}\nAnswer: {row['answer']}"


class Examples(NamedTuple):
    """A file's rendered examples and the sentences they were built from (a templated row: its text)."""

    texts: list[str]
    sources: set[str]


def texts_of(shape: str, make, n: int, seed: int, exclude: set[str] = frozenset()) -> Examples:
    """``n`` distinct rendered examples of ``shape`` (rows of ``make(n, seed)``), none built from a
    sentence of ``exclude`` (the ``source`` of a row; a templated row's is its rendered text): an unseen
    file never holds a sentence of the file tuned on, not even with another word blanked or other
    choices. Before 28 November only rendered texts were kept apart, and an ARC-shaped unseen file of 48
    rows held 1-4 of the tuned file's sentences with another blank; the files tuned on are unchanged."""
    texts: list[str] = []
    sources: set[str] = set()
    for row in make(4 * n, seed):
        text = render(shape, row)
        source = row.get("source", text)
        if source not in exclude and text not in texts:
            texts.append(text)
            sources.add(source)
        if len(texts) == n:
            return Examples(texts, sources)
    raise SystemExit(f"{shape}, seed {seed}: only {len(texts)} distinct examples")


def write_texts(path: Path, texts: list[str], labels: list[int] | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [
        {"text": t} if labels is None else {"text": t, "label": y} for t, y in zip(texts, labels or texts, strict=True)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


class Harness:
    """``lm_eval.simple_evaluate`` on the HF backend (CPU, float32) with this checkout's task configs
    (not lm-eval's own: the examples come from local files, and indexing lm-eval's 14,000 task YAMLs
    would cost 15 s a run)."""

    def __init__(self, batch_size: int):
        self.batch_size = batch_size

    def run(self, model: Path | str, tasks: list[str], metadata: dict) -> tuple[dict, float]:
        import lm_eval
        from lm_eval.tasks import TaskManager

        began = time.perf_counter()
        manager = TaskManager(
            include_path=str(REPO / "task_configs"),
            include_defaults=False,
            metadata={"pretrained": str(model), **metadata},  # as the command line merges --model_args
        )
        results = lm_eval.simple_evaluate(
            model="hf",
            model_args={"pretrained": str(model), "dtype": "float32"},
            tasks=tasks,
            device="cpu",
            batch_size=self.batch_size,
            task_manager=manager,
            log_samples=True,
            bootstrap_iters=0,
        )
        return results, time.perf_counter() - began


def dataset_tests(harness: Harness, model, data: Path, args, codec: bool = True, exchangeability: bool = True) -> dict:
    """CoDeC and the exchangeability test on ``data`` (each unless False): scores and p-values, and where
    both ran, each one's flag and the verdict."""
    tasks = ["pdd_codec"] * codec + ["pdd_exchangeability"] * exchangeability
    metadata = {
        "data_files": str(data),
        "text_field": "text",
        "num_shards": args.shards,
        "permutations": args.permutations,
    }
    results, seconds = harness.run(model, tasks, metadata)
    values = results["results"]
    out: dict = {"seconds": round(seconds, 1)}
    if exchangeability:
        out |= {
            "exchangeability_pvalue": values["pdd_exchangeability"]["exchangeability_pvalue,none"],
            "exchangeability_mean_difference": values["pdd_exchangeability"]["exchangeability_mean_difference,none"],
        }
    if codec:
        score, n = values["pdd_codec"]["codec_score,none"], int(values["pdd_codec"]["codec_examples,none"])
        out |= {
            "codec_score": score,
            "codec_examples": n,
            "codec_ci95": [
                values["pdd_codec"]["codec_score_ci95_low,none"],
                values["pdd_codec"]["codec_score_ci95_high,none"],
            ],
            "codec_pvalue": codec_pvalue(round(score * n), n),
        }
    if codec and exchangeability:
        codec = (round(out["codec_score"] * out["codec_examples"]), out["codec_examples"])
        decision = decide({"codec": codec_evidence(*codec), "exchangeability": Evidence(out["exchangeability_pvalue"])})
        out |= {"flags": decision.flags, "verdict": decision.verdict}
    return out


def ptdi_scores(harness: Harness, model, members: list[str], held_out: list[str], path: Path):
    """Every text's score with every default method (labelled ``pdd_custom``): methods, scores, labels."""
    from pdd_tasks.registry import DEFAULT_METHODS

    write_texts(path, members + held_out, [1] * len(members) + [0] * len(held_out))
    results, seconds = harness.run(model, ["pdd_custom"], {"data_files": str(path), "lowercase": False})
    samples = sorted(results["samples"]["pdd_custom"], key=lambda s: s["doc_id"])
    methods = [m for m in DEFAULT_METHODS if f"{m}_auc" in samples[0]]
    scores = np.array([[s[f"{m}_auc"][0] for m in methods] for s in samples])
    return methods, scores, np.array([1] * len(members) + [0] * len(held_out)), seconds


def ptdi(harness, model, members, held_out, path, args, tuned: bool) -> dict:
    methods, scores, labels, seconds = ptdi_scores(harness, model, members, held_out, path)
    if not tuned:
        labels = np.zeros_like(labels)  # the untuned model saw none of them
    n_members = int(labels.sum())
    non_members = args.unseen_suspects if tuned else args.examples + args.unseen_suspects
    references = args.held_out - args.unseen_suspects
    rows = measure(scores, labels, methods, n_members, non_members, references, args.ptdi_draws, args.target_fdr)
    for row in rows:
        row["power"] = None if not tuned else row["power"]
    return {
        "members": n_members,
        "non_member_suspects": non_members,
        "references": references,
        "draws": args.ptdi_draws,
        "target_fdr": args.target_fdr,
        "methods": rows,
        "seconds": round(seconds, 1),
    }


def share_of(flagged: int, files: int) -> float | None:
    """The share of ``files`` flagged (None: no file)."""
    return flagged / files if files else None


def summary(shape_results: dict, args, seconds: float, load: list) -> dict:
    """What the verdict reads: per shape, each rule's level and its power after each number of epochs."""
    shapes = {}
    for shape, found in shape_results.items():
        if shape == "diverse" or not (found["level"] or found["tuned"]):
            continue
        level = found["level"]
        seeds = len(level)
        shapes[shape] = {
            "like": SHAPES[shape][0],
            "sizes": {
                "examples": args.examples,
                "level_files": args.level_seeds,
                "shards": args.shards,
                "permutations": args.permutations,
                "ptdi": not args.no_ptdi,
                "rows": rows_label(args),
                "training": f"AdamW lr {args.learning_rate:g}, {args.train_batch} block(s) of 8 examples a step",
            },
            "level": {
                "files": seeds,
                "codec": share_of(sum(r["flags"]["codec"] for r in level), seeds),
                "exchangeability": share_of(sum(r["flags"]["exchangeability"] for r in level), seeds),
                "both": share_of(sum(r["verdict"] == "contaminated" for r in level), seeds),
            },
            "power": {
                epochs: {
                    "codec": bool(r["flags"]["codec"]),
                    "exchangeability": bool(r["flags"]["exchangeability"]),
                    "both": r["verdict"] == "contaminated",
                    "optimizer_steps": r["training"].get("steps_in_all", r["training"]["steps"]),
                    "codec_score": round(r["codec_score"], 3),
                    "codec_pvalue": float(f"{r['codec_pvalue']:.3g}"),
                    "exchangeability_pvalue": float(f"{r['exchangeability_pvalue']:.3g}"),
                    "exchangeability_shuffled_pvalue": float(f"{r['shuffled']['exchangeability_pvalue']:.3g}")
                    if "shuffled" in r
                    else None,
                }
                for epochs, r in found["tuned"].items()
            },
        }
    return {
        "what": "level and power of pdd_contamination's verdict rule on benchmark-shaped files (issue 20, item 4)",
        "command": command_line(),
        "model": model_label(args),
        "sizes": {
            "examples": args.examples,
            "held_out": args.held_out,
            "unseen_suspects": args.unseen_suspects,
            "level_files": args.level_seeds,
            "ptdi_draws": args.ptdi_draws,
            "target_fdr": args.target_fdr,
            "shards": args.shards,
            "permutations": args.permutations,
            "alpha": ALPHA,
            "tuned_once_per_shape_and_epochs": True,
        },
        "machine": machine(f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}"),
        "load_average": load,
        "minutes": round(seconds / 60, 1),
        "shapes": shapes,
    } | (
        {"diverse_level": diverse_level(shape_results["diverse"], diverse_source(args), command_line())}
        if shape_results.get("diverse")
        else {}
    )


def diverse_source(args) -> str:
    return (
        f"pile-test-sample (the Pile's test split, 17 domains), {args.examples} documents a file, "
        f"each its first {args.diverse_words} words"
    )


def diverse_level(results: list[dict], source: str, command: str) -> dict:
    """CoDeC's level on untouched files of varied content (Pile test documents): how often its binomial
    p-value rejects alone (p <= alpha) and where the other test does not reject (Holm over two: p <= alpha/2)."""
    files = len(results)
    return {
        "source": source,
        "command": command,
        "files": files,
        "codec_scores": [round(r["codec_score"], 3) for r in results],
        "codec_pvalues": [float(f"{r['codec_pvalue']:.3g}") for r in results],
        "codec_alone": sum(r["codec_pvalue"] <= ALPHA for r in results) / files,
        "codec_in_the_rule": sum(r["codec_pvalue"] <= ALPHA / 2 for r in results) / files,
    }


def ptdi_range(block: dict | None, key: str) -> str:
    if block is None:
        return "not run"
    values = [row[key] for row in block["methods"]]
    low, high = min(values), max(values)
    return f"{low:.3f}" if abs(high - low) < 5e-4 else f"{low:.3f}-{high:.3f}"


def markdown(found: dict) -> str:
    """One row per model: the untuned one on its untouched files (each file's value, then how many the
    rule flags), each tuned one on the file it saw."""
    lines = [
        "| shape (examples) | model (optimizer steps) | CoDeC score (binomial p) | exchangeability p | "
        "shuffled copy p | verdict | PTDI realised FDR | PTDI power |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for shape, results in found.items():
        if shape == "diverse" or not (results["level"] or results["tuned"]):
            continue
        level, examples = results["level"], [*results["level"], *results["tuned"].values()][0]["codec_examples"]
        n = len(level)
        flagged = {k: sum(r["flags"][k] for r in level) for k in ("codec", "exchangeability")}
        both = sum(r["verdict"] == "contaminated" for r in level)
        lines.append(
            f"| {SHAPES[shape][0]}-shaped ({examples}) | untuned, {n} untouched file{'s' if n > 1 else ''} | "
            + ", ".join(f"{r['codec_score']:.3f}" for r in level)
            + f" (flagged {flagged['codec']}/{n}) | "
            + ", ".join(f"{r['exchangeability_pvalue']:.2g}" for r in level)
            + f" (flagged {flagged['exchangeability']}/{n}) | - | contaminated {both}/{n} | "
            f"{ptdi_range(results.get('ptdi_untuned'), 'fdr')} | n/a |"
            if n
            else f"| {SHAPES[shape][0]}-shaped ({examples}) | untuned | not run | not run | - | - | "
            f"{ptdi_range(results.get('ptdi_untuned'), 'fdr')} | n/a |"
        )
        for epochs, r in results["tuned"].items():
            shuffled = f"{r['shuffled']['exchangeability_pvalue']:.2g}" if "shuffled" in r else "-"
            lines.append(
                f"| {SHAPES[shape][0]}-shaped ({examples}) | tuned {epochs} epoch{'s' if epochs != '1' else ''} "
                f"({r['training'].get('steps_in_all', r['training']['steps'])}) | "
                f"{r['codec_score']:.3f} ({r['codec_pvalue']:.2g}) | "
                f"{r['exchangeability_pvalue']:.2g} | {shuffled} | {r['verdict']} | "
                f"{ptdi_range(r.get('ptdi'), 'fdr')} | {ptdi_range(r.get('ptdi'), 'power')} |"
            )
    if found.get("diverse"):
        level, n = found["diverse"], len(found["diverse"])
        lines.append(
            f"| Pile test documents ({level[0]['codec_examples']}) | untuned, {n} untouched file{'s' if n > 1 else ''} | "
            + ", ".join(f"{r['codec_score']:.3f} ({r['codec_pvalue']:.2g})" for r in level)
            + f" (p <= {ALPHA / 2:g}: {sum(r['codec_pvalue'] <= ALPHA / 2 for r in level)}/{n}) | not run | - | "
            "- | not run | n/a |"
        )
    return "\n".join(lines)


def _same_model_tuned_from(recorded: str, tuned_from, directory: Path) -> bool:
    """Whether a reused model's recorded base, ``recorded``, is ``tuned_from``: the same path, or, for a model
    tuned from an earlier one of the same workdir (the model of fewer epochs beside it), the same path
    within the workdir, so that a workdir copied or moved elsewhere (docs/controls-ordered.md copies one) is still reused."""
    tuned_from, recorded = Path(tuned_from), Path(recorded)
    if recorded == tuned_from:
        return True
    try:
        inside = tuned_from.relative_to(directory.parent)  # e.g. tuned-e1/model
    except ValueError:
        return False
    return recorded.parts[-len(inside.parts) :] == inside.parts


def _check_reused(directory: Path, tuned_from, data: Path, epochs: int, seed: int, args, exposure: str) -> None:
    """A model a run before left in ``directory`` is reused only if it was tuned as this run would tune
    it: from the same model, on the same examples, with the same exposure and settings."""
    manifest = json.loads((directory / "manifest.json").read_text())
    trained = sorted(json.loads(line)["text"] for line in (directory / "canonical.jsonl").read_text().splitlines())
    wanted = sorted(json.loads(line)["text"] for line in data.read_text().splitlines())
    settings = {"seed": seed, "learning_rate": args.learning_rate, "batch_size": args.train_batch, "epochs": epochs}
    differs = [
        what
        for what, same in (
            ("the model tuned from", _same_model_tuned_from(manifest["base_model"], tuned_from, directory)),
            ("the examples", trained == wanted),
            ("the exposure", manifest["exposure"] == exposure),
            *((key, manifest["settings"][key] == value) for key, value in settings.items()),
        )
        if not same
    ]
    if differs:
        raise SystemExit(
            f"{directory} holds a model an earlier run tuned otherwise ({', '.join(differs)}: not this run's); "
            "remove that folder (or choose another --workdir) to tune it again."
        )


def tune_once(
    directory: Path, tuned_from, data: Path, epochs: int, seed: int, args, exposure: str, examples: int | None = None
) -> None:
    """``make-ordered`` into ``directory`` (unless a run before wrote it): the model ``tuned_from`` (the
    base, or the model of the previous number of epochs) tuned ``epochs`` more epochs on the first
    ``examples`` rows of ``data`` (default ``--examples``)."""
    from pdd_tasks.tools.builders.fine_tuning import TuningSettings
    from pdd_tasks.tools.builders.ordered import make_ordered

    if (directory / "manifest.json").exists():
        _check_reused(directory, tuned_from, data, epochs, seed, args, exposure)
        return
    settings = TuningSettings(
        epochs=epochs, learning_rate=args.learning_rate, batch_size=args.train_batch, max_tokens=1024, seed=seed
    )
    make_ordered(directory, tuned_from, source=str(data), text_field="text", examples=examples or args.examples,
                 settings=settings, progress=False, exposure=exposure)  # fmt: skip


def exposure_controls(harness: Harness, base, shape: str, make, args) -> dict:
    """The exposure controls of ``shape`` (module docstring): per tuning seed, the untuned model on its
    file, and after each of ``args.epochs`` the tuned model on the file and on ``args.unseen_files``
    unseen files of the shape. With ``--tune-on all`` the model is tuned on the file and those other
    files together (each example a training text as ``--exposure examples`` makes it, one epoch each
    example once: the steps per file of ``--tune-on one``), and tested on each (``also_tuned``, no
    unseen file). Writes nothing but the models under ``args.workdir``."""

    runs = []
    all_tuned = args.tune_on == "all"
    for tuning_seed in range(args.tuning_seeds):
        work = args.workdir / f"{shape}-{args.exposure}-s{tuning_seed}{'-all' if all_tuned else ''}"
        members = texts_of(shape, make, args.examples, SHAPES[shape][2] + 10 * tuning_seed)
        data = write_texts(work / "file.jsonl", members.texts)
        seen = set(members.sources)
        unseen_files, tuned_texts = [], list(members.texts)
        for index in range(args.unseen_files):  # the same files either way: --tune-on all tunes on them too
            rows = texts_of(shape, make, args.examples, 3000 + 100 * tuning_seed + index, exclude=seen)
            seen |= rows.sources
            tuned_texts += rows.texts
            unseen_files.append(write_texts(work / f"unseen-{index}.jsonl", rows.texts))
        tuned_on = write_texts(work / "all-files.jsonl", tuned_texts) if all_tuned else data
        tests = {"codec": "codec" in args.tests, "exchangeability": "exchangeability" in args.tests}
        run = {"tuning_seed": tuning_seed, "untuned": dataset_tests(harness, base, data, args, **tests), "tuned": {}}
        print(shape, args.exposure, tuning_seed, "untuned", run["untuned"], file=sys.stderr, flush=True)
        previous, tuned_from, steps = 0, base, 0
        for epochs in sorted(args.epochs):
            directory = work / f"tuned-e{epochs}"
            seed, examples = 1000 * tuning_seed + epochs, len(tuned_texts) if all_tuned else args.examples
            tune_once(directory, tuned_from, tuned_on, epochs - previous, seed, args, args.exposure, examples)
            model = directory / "model"
            previous, tuned_from = epochs, model
            training = json.loads((directory / "manifest.json").read_text())["training"]
            steps += training["steps"]
            tested = dataset_tests(harness, model, data, args, **tests)
            others = [dataset_tests(harness, model, file, args, **tests) for file in unseen_files]
            tested["unseen"] = [] if all_tuned else others
            if all_tuned:
                tested["also_tuned"] = others
            tested["training"] = training | {"steps_in_all": steps}
            run["tuned"][str(epochs)] = tested
            print(shape, args.exposure, tuning_seed, "tuned", epochs, tested, file=sys.stderr, flush=True)
        runs.append(run)
    command = recorded_command(SCRIPT, sys.argv[1:], leave_out=("--workdir",))
    return {"exposure": args.exposure, "tune_on": args.tune_on, "command": command, "runs": runs}


def _rate(results: list[dict], key: str) -> float | None:
    """The share of ``results`` whose ``key`` p-value is at most alpha (None: none)."""
    return sum(r[key] <= ALPHA for r in results) / len(results) if results else None


def exposure_summary(found: dict, args, seconds: float, load: list) -> dict:
    """Per shape: the untuned model's scores on untouched files, and per number of epochs the tuned
    models' on the file tuned on and on unseen files of the shape; each test's rejection rate (p <=
    alpha, alone) and the highest CoDeC score on unseen data of the shape (untuned and tuned models)."""
    shapes = {}
    for shape, entry in found.items():
        runs = entry["runs"]
        untuned = [r["untuned"] for r in runs]
        tuned = {}
        for epochs in sorted({e for r in runs for e in r["tuned"]}, key=int):
            files = [r["tuned"][epochs] for r in runs if epochs in r["tuned"]]
            unseen = [u for f in files for u in f["unseen"]]
            also_tuned = [u for f in files for u in f.get("also_tuned", [])]  # --tune-on all
            tuned[epochs] = {
                "optimizer_steps": [f["training"]["steps_in_all"] for f in files],
                "file": _cells(files),
                **({"unseen": _cells(unseen)} if unseen else {}),
                **({"also_tuned": _cells(also_tuned)} if also_tuned else {}),
                # the file against its tuning's first unseen file as a reference (what `references` computes)
                "file_against_unseen_pvalues": [
                    float(f"{codec_reference_pvalue(*_drops(f), *_drops(f['unseen'][0])):.3g}")
                    for f in files
                    if f["unseen"]
                ],
            }
        unseen_scores = [r["codec_score"] for r in untuned] + [
            u["codec_score"] for r in runs for t in r["tuned"].values() for u in t["unseen"]
        ]
        shapes[shape] = {
            "like": SHAPES[shape][0],
            "exposure": entry["exposure"],
            "tune_on": entry.get("tune_on", "one"),
            "command": entry.get("command"),
            "untuned": _cells(untuned),
            "tuned": tuned,
            "highest_unseen_codec_score": max(unseen_scores) if unseen_scores else None,
        }
    return {
        "what": "the contamination tests on benchmark-shaped files seen as one exposure (issue 33)",
        "command": recorded_command(SCRIPT, sys.argv[1:], leave_out=("--workdir",)),
        "model": model_label(args),
        "sizes": {
            "examples": args.examples,
            "tuning_seeds": args.tuning_seeds,
            "unseen_files": args.unseen_files,
            "tune_on": args.tune_on,
            "tests": args.tests,
            "epochs": args.epochs,
            "shards": args.shards,
            "permutations": args.permutations,
            "train_batch": args.train_batch,
            "learning_rate": args.learning_rate,
            "alpha": ALPHA,
            "rows": rows_label(args),
        },
        "machine": machine(f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}"),
        "load_average": load,
        "minutes": round(seconds / 60, 1),
        "shapes": shapes,
    }


def model_label(args) -> str:
    """The base model, for the JSON: ``--model`` or the default model."""
    name = f"{args.model} (--model)" if args.model else "SmolLM2-135M-Instruct (the default model)"
    return f"{name}, float32, CPU"


def _drops(result: dict) -> tuple[int, int]:
    """``(examples whose likelihood drops in context, examples)`` of one file's CoDeC result."""
    return round(result["codec_score"] * result["codec_examples"]), result["codec_examples"]


def _cells(results: list[dict]) -> dict:
    """Each test's scores and p-values on ``results``' files, and how many each rejects alone: CoDeC
    against 1/2 (``codec_rejects``) and against the verdict's calibrated null
    (``codec_calibrated_rejects``, :data:`pdd_metrics.verdict.CODEC_NULL_SCORE`), and the verdicts
    of one-file tables (:func:`pdd_metrics.verdict.decide`; of CoDeC alone where the exchangeability
    test was not run, ``--tests codec``: its p-values are then None)."""
    drops = [_drops(r) for r in results]
    calibrated = [codec_calibrated_pvalue(*d) for d in drops]
    ran_exchangeability = all("exchangeability_pvalue" in r for r in results)
    verdicts = [
        decide(
            {
                "codec": codec_evidence(*d),
                "exchangeability": Evidence(r["exchangeability_pvalue"]) if ran_exchangeability else None,
            }
        ).verdict
        for d, r in zip(drops, results, strict=True)
    ]
    return {
        "files": len(results),
        "codec_scores": [round(r["codec_score"], 3) for r in results],
        "codec_pvalues": [float(f"{r['codec_pvalue']:.3g}") for r in results],
        "codec_rejects": _rate(results, "codec_pvalue"),
        "codec_null": CODEC_NULL_SCORE,
        "codec_calibrated_pvalues": [float(f"{p:.3g}") for p in calibrated],
        "codec_calibrated_rejects": sum(p <= ALPHA for p in calibrated) / len(results) if results else None,
        "verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts))},
        "exchangeability_pvalues": [float(f"{r['exchangeability_pvalue']:.3g}") for r in results]
        if ran_exchangeability
        else None,
        "exchangeability_rejects": _rate(results, "exchangeability_pvalue") if ran_exchangeability else None,
    }


def exposure_markdown(summary_: dict) -> str:
    """One row per shape and model: CoDeC's scores and the exchangeability p-values on each file, and
    how many files each test rejects alone (p <= alpha)."""
    lines = [
        "| shape (examples), exposure | model (optimizer steps) | data | CoDeC scores | CoDeC p <= 0.05: "
        f"null 1/2, null {CODEC_NULL_SCORE:g} | exchangeability p | exchangeability p <= 0.05 | verdicts |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def row(label, model, data, cells):
        n = cells["files"]
        if cells["exchangeability_pvalues"] is None:  # --tests codec
            exchangeability = "not run | not run"
        else:
            exchangeability = (
                f"{', '.join(f'{v:.2g}' for v in cells['exchangeability_pvalues'])} | "
                f"{round(cells['exchangeability_rejects'] * n)}/{n}"
            )
        return (
            f"| {label} | {model} | {data} | {', '.join(f'{v:.3f}' for v in cells['codec_scores'])} | "
            f"{round(cells['codec_rejects'] * n)}/{n}, {round(cells['codec_calibrated_rejects'] * n)}/{n} | "
            f"{exchangeability} | {', '.join(f'{k} {v}' for k, v in cells['verdicts'].items())} |"
        )

    for found in summary_["shapes"].values():
        label = f"{found['like']}-shaped ({summary_['sizes']['examples']}), {found['exposure']}"
        lines.append(row(label, "untuned", "untouched files", found["untuned"]))
        for epochs, cells in found["tuned"].items():
            model = f"tuned {epochs} epoch(s) ({'/'.join(map(str, sorted(set(cells['optimizer_steps']))))})"
            lines.append(row(label, model, "the file tuned on", cells["file"]))
            for key, data in (("unseen", "unseen files of the shape"), ("also_tuned", "the other files tuned on")):
                if key in cells:
                    lines.append(row(label, model, data, cells[key]))
    for found in summary_["shapes"].values():
        for epochs, cells in found["tuned"].items():
            if cells.get("file_against_unseen_pvalues"):
                lines.append(
                    f"\n{found['like']}-shaped, tuned {epochs} epoch(s): CoDeC of each file tuned on against its "
                    f"tuning's unseen file as a reference (one-sided Fisher, what `references` computes): p = "
                    f"{', '.join(f'{v:.2g}' for v in cells['file_against_unseen_pvalues'])}"
                )
    return "\n".join(lines)


def command_line() -> str:
    """This run's command, less ``--workdir`` and ``--shapes`` (a run of some shapes adds them to the
    files of the others: the command that reproduces the whole file names neither)."""
    return recorded_command(SCRIPT, sys.argv[1:], leave_out=("--workdir", "--shapes"))


def merged(earlier: dict, current: dict, both_diverse: bool = False) -> dict:
    """Two ``--json`` documents (``{"summary", "runs"}``) as one: the shapes of both, ``current``'s
    where both have one; each shape keeps its sizes and the machine, load and time of its run. The
    Pile-test files: ``current``'s, or with ``both_diverse`` (two runs of other files) those of both."""

    def shapes_and_runs(document: dict) -> tuple[dict, dict]:
        found = document["summary"]
        shapes = {shape: {"sizes": found["sizes"], **entry} for shape, entry in found["shapes"].items()}
        runs = {  # an entry without its command (an older file): the document's
            shape: {"command": found["command"], **entry}
            for shape, entry in (found.get("runs_of_shapes") or {}).items()
        } or {
            shape: {key: found[key] for key in ("command", "machine", "load_average", "minutes")}
            for shape in found["shapes"]
        }
        return shapes, runs

    earlier_shapes, earlier_runs = shapes_and_runs(earlier)
    shapes, runs = shapes_and_runs(current)
    diverse = current["summary"].get("diverse_level") or earlier["summary"].get("diverse_level")
    runs_of_both = {**earlier["runs"], **current["runs"]}
    if both_diverse and earlier["runs"].get("diverse") and current["runs"].get("diverse"):
        runs_of_both["diverse"] = earlier["runs"]["diverse"] + current["runs"]["diverse"]
        commands = [earlier["summary"]["diverse_level"]["command"], current["summary"]["diverse_level"]["command"]]
        diverse = diverse_level(runs_of_both["diverse"], diverse["source"], " && ".join(dict.fromkeys(commands)))
    together = {
        **current["summary"],
        **({"diverse_level": diverse} if diverse else {}),
        "shapes": {**earlier_shapes, **shapes},
        "runs_of_shapes": {**earlier_runs, **runs},
    }
    return {"summary": together, "runs": runs_of_both}


def require_earlier_runs(option: str, paths: list[Path]) -> None:
    """Stop with a message naming ``option``'s files that do not exist (each the --json of an earlier run)."""
    missing = [str(path) for path in paths if not path.is_file()]
    if missing:
        raise SystemExit(f"{option}: no such file: {', '.join(missing)} (the --json of an earlier run).")


#: Keys of the packaged controls that other runs write (the exposure controls' ``--table-from``,
#: ``exchangeability_level.py``): a level and power run writing ``--package-data`` keeps them.
OTHER_RUNS_PACKAGE_KEYS = (*EXPOSURE_KEYS, "exchangeability_level")


def write_files(document: dict, args) -> None:
    """``document`` to ``--json``, its summary to ``--package-data`` (beside the other runs' keys there)."""
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(document, indent=1) + "\n")
    if args.package_data:
        earlier = json.loads(args.package_data.read_text()) if args.package_data.is_file() else {}
        kept = {key: earlier[key] for key in OTHER_RUNS_PACKAGE_KEYS if key in earlier}
        args.package_data.write_text(json.dumps(document["summary"] | kept, indent=1) + "\n")


def write(found: dict, args, began: float, load: list) -> dict:
    """Write the JSON files of what ``found`` holds so far, beside the shapes another run wrote there;
    returns the summary."""
    document = {
        "summary": summary(found, args, time.perf_counter() - began, [*load, list(os.getloadavg())]),
        "runs": found,
    }
    if args.json and args.json.is_file():
        document = merged(json.loads(args.json.read_text()), document)
    write_files(document, args)
    return document["summary"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path("contamination_controls"))
    parser.add_argument("--model", default=None, help="base model (default: the default model)")
    parser.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--examples", type=int, default=32, help="rows per file (tuned on, and tested)")
    parser.add_argument("--held-out", type=int, default=52, help="unseen rows of the same shape for PTDI")
    parser.add_argument("--unseen-suspects", type=int, default=16, help="of --held-out, suspects per PTDI draw")
    parser.add_argument("--level-seeds", type=int, default=2, help="untouched files per shape")
    parser.add_argument(
        "--epochs", nargs="*", type=arg_types.epochs, default=[1, 2, 3], help="test the model after these"
    )
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--permutations", type=int, default=2)
    parser.add_argument("--ptdi-draws", type=int, default=200)
    parser.add_argument("--no-ptdi", action="store_true", help="leave PTDI out (the slowest part)")
    parser.add_argument("--target-fdr", type=float, default=0.1)
    parser.add_argument("--batch-size", type=int, default=8, help="scoring batch")
    parser.add_argument(
        "--rows", choices=["sentences", "pile", "templated"], default="sentences",
        help="benchmark rows built from real sentences (WikiMIA-24's non-members; default), from the Pile test "
        "sample's prose (--pile; for files of more than ~700 rows) or the templated generators of "
        "tests/support/standard_tasks.py",
    )  # fmt: skip
    parser.add_argument("--sentences", type=Path, default=SHARED_DATA / "WikiMIA-24", help="WikiMIA-24's folder")
    parser.add_argument("--words", type=int, default=32, help="each sentence text cut to its first N words")
    parser.add_argument("--train-batch", type=int, default=1, help="training texts (blocks of 8 examples) per step")
    parser.add_argument("--learning-rate", type=float, default=1e-4, help="AdamW, constant (make-ordered's)")
    parser.add_argument("--diverse-files", type=int, default=0, help="untouched Pile-test files for CoDeC's level")
    parser.add_argument(
        "--diverse-start", type=int, default=0, help="the first Pile-test file's number (its seed: 700 + it)"
    )
    parser.add_argument("--diverse-words", type=int, default=64, help="each Pile document cut to this many words")
    parser.add_argument("--pile", type=Path, default=SHARED_DATA / "pile-test-sample" / "pile_test_sample.jsonl.gz")
    parser.add_argument(
        "--exposure", choices=["ordered", "shuffled", "examples"], default=None,
        help="the exposure controls (issue 33): tune on each seed's file as this exposure, test it and unseen files",
    )  # fmt: skip
    parser.add_argument(
        "--tests", nargs="+", choices=["codec", "exchangeability"], default=["codec", "exchangeability"],
        help="exposure controls: the tests run on each file (default both; codec alone for large files)",
    )  # fmt: skip
    parser.add_argument(
        "--tuning-seeds", type=arg_types.positive_int, default=3, help="exposure controls: files and tunings per shape"
    )
    parser.add_argument(
        "--unseen-files", type=arg_types.non_negative_int, default=1, help="exposure controls: unseen files per tuning"
    )
    parser.add_argument(
        "--tune-on", choices=["one", "all"], default="one",
        help="exposure controls: tune on the seed's file alone, the --unseen-files files unseen (one; default), or "
        "on the file and those files together, the same files, every one seen (all; an epoch: each example once)",
    )  # fmt: skip
    add_json_option(parser, "write every number here (a level run keeps the shapes of another run there)")
    parser.add_argument("--package-data", type=Path, help="write the verdict's summary here")
    parser.add_argument(
        "--package-key", default=EXPOSURE_KEYS[0], choices=EXPOSURE_KEYS,
        help="--table-from of exposure controls: the key of --package-data they go under (files of 48 examples; "
        "files of CoDeC's default 1,000)",
    )  # fmt: skip
    parser.add_argument("--merge", type=Path, help="add the shapes of this --json file to --json and --package-data")
    parser.add_argument(
        "--table-from", type=Path, nargs="+",
        help="only print the Markdown table of this --json file (exposure controls: of these files' shapes together, "
        "written to --json and, under exposure_controls, to --package-data where given)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.tune_on == "all" and not args.exposure:
        parser.error("--tune-on all tunes the exposure controls' model: add --exposure (ordered, shuffled or examples)")
    if args.tune_on == "all" and args.unseen_files < 1:
        parser.error(
            "--tune-on all tunes on the file and its --unseen-files files together: give --unseen-files 1 or more"
        )
    if args.merge:
        if args.json is None or not args.json.is_file():
            raise SystemExit(
                "--merge adds the shapes of a run to the file --json names: give --json FILE of an earlier run."
            )
        require_earlier_runs("--merge", [args.merge])
        document = merged(json.loads(args.json.read_text()), json.loads(args.merge.read_text()), both_diverse=True)
        write_files(document, args)
        print(markdown(document["runs"]))
        return 0
    refuse_existing_json(args)
    if args.table_from:
        require_earlier_runs("--table-from", args.table_from)
        documents = [json.loads(path.read_text()) for path in args.table_from]
        document = documents[0]
        if "exposure" in json.dumps(document["summary"].get("what", "")):
            if args.package_data and any(each["summary"]["sizes"].get("tune_on") == "all" for each in documents):
                raise SystemExit(
                    "--package-data: a --tune-on all run has no unseen file (the verdict's controls need them); "
                    "leave --package-data out for it."
                )
            # the shapes of every file as one document, the summary again from every file's numbers (with
            # this checkout's CODEC_NULL_SCORE); each shape keeps the command of its run
            runs = {}
            for each in documents:
                for shape, entry in each["runs"].items():
                    runs[shape] = {"command": each["summary"]["command"]} | entry
            summary_ = document["summary"] | exposure_summary(runs, args, 0, None)
            summary_ |= {
                key: document["summary"][key]
                for key in ("command", "model", "minutes", "load_average", "sizes", "machine")
                if key in document["summary"]
            }
            if len(documents) > 1:  # the runs whose shapes were kept (a later file's shape replaces an earlier's)
                summary_["command"] = " && ".join(dict.fromkeys(entry["command"] for entry in runs.values()))
            if args.json:
                args.json.write_text(json.dumps({"summary": summary_, "runs": runs}, indent=1) + "\n")
            if args.package_data:  # beside the other controls the verdict reads
                package = json.loads(args.package_data.read_text()) if args.package_data.is_file() else {}
                args.package_data.write_text(json.dumps(package | {args.package_key: summary_}, indent=1) + "\n")
            print(exposure_markdown(summary_))
        else:
            print(markdown(document["runs"]))
        return 0
    if args.exposure:
        return exposure_main(args)

    from pdd_tasks.tools.default_model import ensure_default_model

    began = time.perf_counter()
    load = [list(os.getloadavg())]
    base = args.model or ensure_default_model()
    harness = Harness(args.batch_size)
    makers = row_makers(args) if args.shapes else {}
    found: dict = {}
    if args.diverse_files:
        found["diverse"] = []
        for index in range(args.diverse_start, args.diverse_start + args.diverse_files):
            texts = diverse_texts(args.pile, args.examples, 700 + index, args.diverse_words)
            file = write_texts(args.workdir / "diverse" / f"pile-{index}.jsonl", texts)
            found["diverse"].append(dataset_tests(harness, base, file, args, exchangeability=False))
            print("diverse", index, found["diverse"][-1], file=sys.stderr, flush=True)
            write(found, args, began, load)
    for shape in args.shapes:
        work = args.workdir / shape
        seed, make = SHAPES[shape][2], makers[shape]
        file = texts_of(shape, make, args.examples, seed)
        members = file.texts
        held_out = texts_of(shape, make, args.held_out, seed + 1000, exclude=file.sources).texts
        data = write_texts(work / "file.jsonl", members)
        results = found[shape] = {"level": [], "tuned": {}}
        if not args.no_ptdi:
            results["ptdi_untuned"] = ptdi(harness, base, members, held_out, work / "ptdi.jsonl", args, tuned=False)
        previous, tuned_from = 0, base
        for epochs in sorted(args.epochs):
            directory = work / f"tuned-e{epochs}"
            tune_once(directory, tuned_from, data, epochs - previous, epochs, args, "ordered")
            model = directory / "model"
            previous, tuned_from = epochs, model
            tested = dataset_tests(harness, model, directory / "canonical.jsonl", args)
            if epochs == max(args.epochs):  # the negative control where the order was seen most
                tested["shuffled"] = dataset_tests(harness, model, directory / "shuffled.jsonl", args, codec=False)
            if not args.no_ptdi:
                tested["ptdi"] = ptdi(harness, model, members, held_out, work / "ptdi.jsonl", args, tuned=True)
            tested["training"] = json.loads((directory / "manifest.json").read_text())["training"]
            tested["training"]["steps_in_all"] = (
                sum(r["training"]["steps"] for r in results["tuned"].values()) + (tested["training"]["steps"])
            )
            results["tuned"][str(epochs)] = tested
            print(shape, "tuned", epochs, {k: v for k, v in tested.items() if k != "ptdi"}, file=sys.stderr, flush=True)
            write(found, args, began, load)
        # then the untouched files (power first: the measurement a short run must not lose)
        for level_seed in range(args.level_seeds):
            rows = texts_of(shape, make, args.examples, 500 + level_seed).texts
            file = write_texts(work / f"level-{level_seed}.jsonl", rows)
            results["level"].append(dataset_tests(harness, base, file, args))
            print(shape, "untuned", level_seed, results["level"][-1], file=sys.stderr, flush=True)
            write(found, args, began, load)  # after each model: a partial run leaves its numbers
    data_summary = write(found, args, began, load)
    print(
        f"machine: {data_summary['machine']}; load average before/after: {data_summary['load_average']}; "
        f"{data_summary['minutes']} min"
    )
    print(markdown(found))
    return 0


def exposure_main(args) -> int:
    """The exposure controls (``--exposure``): every shape of ``--shapes``, written to ``--json`` after each."""
    from pdd_tasks.tools.default_model import ensure_default_model

    began, load = time.perf_counter(), [list(os.getloadavg())]
    base = args.model or ensure_default_model()
    harness, makers, found = Harness(args.batch_size), row_makers(args), {}
    document = {}
    for shape in args.shapes:
        found[shape] = exposure_controls(harness, base, shape, makers[shape], args)
        now = [*load, list(os.getloadavg())]
        document = {"summary": exposure_summary(found, args, time.perf_counter() - began, now), "runs": found}
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(document, indent=1) + "\n")
    if document:
        print(f"machine: {document['summary']['machine']}; load average: {document['summary']['load_average']}; "
              f"{document['summary']['minutes']} min")  # fmt: skip
        print(exposure_markdown(document["summary"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
