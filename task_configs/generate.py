"""Writes the task YAMLs of the families made from a list, with their group files: WikiMIA-24,
WikiMIA paraphrased and WikiMIA-25 (one task per text length), Copyright Traps (one per split) and
MIMIR (one per domain; groups ``pdd_mimir`` and the SoK's ``pdd_mimir_sok``).

    python task_configs/generate.py            # rewrite the YAMLs
    python task_configs/generate.py --check    # list the YAMLs that differ from what it would write

``tests/test_tasks.py`` runs the check, so a YAML edited by hand without this file fails the tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml


HERE = Path(__file__).parent

#: MIMIR: the Min-K%++ paper's split, and the folder of the Hub repository holding its files. The
#: Hub loader of MIMIR is a script (``mimir.py``), which ``datasets`` >= 4 no longer runs; the tasks
#: fetch the two files the script would read (members: ``train/``, non-members: ``test/``).
MIMIR_SPLIT = "ngram_13_0.8"
MIMIR_FOLDER = "cache_100_200_1000_512"
MIMIR_DOMAINS = {  # task suffix: MIMIR config name
    "arxiv": "arxiv",
    "dm_mathematics": "dm_mathematics",
    "github": "github",
    "hackernews": "hackernews",
    "pile_cc": "pile_cc",
    "pubmed_central": "pubmed_central",
    "wikipedia": "wikipedia_(en)",
}
MIMIR_HUB_NOTE = (
    "iamgroot42/mimir is gated: accept its conditions on https://huggingface.co/datasets/iamgroot42/mimir "
    "and log in (`hf auth login`) first."
)


def split_tasks(prefix: str, splits: dict[str, tuple[str, str]], text_field: str) -> dict[str, dict]:
    """One task per Hub split: ``{suffix: (split, label)}`` gives task ``<prefix>_<suffix>`` on
    ``test_split: <split>`` with ``dataset_label: <label>``; labels in ``label``."""
    return {
        f"{prefix}_{suffix}": {
            "include": "_default_template_yaml",
            "task": f"{prefix}_{suffix}",
            "test_split": split,
            "metadata": {
                "version": 1.0,
                "dataset_label": label,
                "data_source": "hub",
                "text_field": text_field,
                "label_field": "label",
            },
        }
        for suffix, (split, label) in splits.items()
    }


def wikimia_lengths(prefix: str, split: str, label: str, lengths: tuple[int, ...]) -> dict[str, dict]:
    """One task per text length, on the Hub split ``split.format(n=...)``; texts in ``input``."""
    return split_tasks(prefix, {str(n): (split.format(n=n), label.format(n=n)) for n in lengths}, "input")


def mimir_domains() -> dict[str, dict]:
    """One task per MIMIR domain, split :data:`MIMIR_SPLIT`."""
    return {
        f"pdd_mimir_{suffix}": {
            "include": "_default_template_yaml",
            "task": f"pdd_mimir_{suffix}",
            "dataset_name": name,
            "metadata": {
                "version": 1.0,
                "dataset_label": f"MIMIR {name} ({MIMIR_SPLIT})",
                "data_source": "hub",
                "hub_note": MIMIR_HUB_NOTE,
                "schema": "member_nonmember",
                "hub_files": {
                    "member": f"{MIMIR_FOLDER}/train/{name}_{MIMIR_SPLIT}.jsonl",
                    "nonmember": f"{MIMIR_FOLDER}/test/{name}_{MIMIR_SPLIT}.jsonl",
                },
            },
        }
        for suffix, name in MIMIR_DOMAINS.items()
    }


WIKIMIA25 = {  # task suffix: (Hub split, label). The card (SimMIA/WikiMIA-25): data/<split>-*.parquet, input, label
    **{str(n): (f"WikiMIA_length{n}", f"WikiMIA-25 (length {n})") for n in (32, 64, 128)},
    "paper": ("paper_subset", "WikiMIA-25 (paper subset)"),  # the paper's own selection: not in the group
}
#: Copyright Traps (imperial-cpg/copyright-traps): nine splits seq_len_<L>_n_rep_<R>, L tokens per
#: trap sequence, each member repeated R times in CroissantLLM's training data; text, label.
COPYRIGHT_TRAPS = {
    f"{length}_{reps}": (f"seq_len_{length}_n_rep_{reps}", f"Copyright Traps ({length} tokens, {reps} repetitions)")
    for length in (25, 50, 100)
    for reps in (10, 100, 1000)
}
#: Left out of MIMIR's SoK group (Meeus et al. 2025 recommend ngram_13_0.8 "yet not the Github split").
MIMIR_NOT_IN_SOK = ("pdd_mimir_github",)


def _families() -> dict[str, tuple[dict[str, dict], dict[str, list[str]]]]:
    """folder: (its tasks, its groups). No group aggregates its tasks: a mean of AUCs is not an AUC."""
    wikimia24 = wikimia_lengths("pdd_wikimia24", "WikiMIA_length{n}", "WikiMIA-24 (length {n})", (32, 64, 128, 256))
    # the paraphrased splits published by the Min-K%++ authors
    paraphrased = wikimia_lengths(
        "pdd_wikimia_paraphrased", "WikiMIA_length{n}_paraphrased", "WikiMIA paraphrased (length {n})", (32, 64, 128)
    )
    wikimia25 = split_tasks("pdd_wikimia25", WIKIMIA25, "input")
    traps = split_tasks("pdd_copyright_traps", COPYRIGHT_TRAPS, "text")
    mimir = mimir_domains()
    return {
        "wikimia24": (wikimia24, {"pdd_wikimia24": list(wikimia24)}),
        "wikimia_paraphrased": (paraphrased, {"pdd_wikimia_paraphrased": list(paraphrased)}),
        "wikimia25": (wikimia25, {"pdd_wikimia25": [name for name in wikimia25 if not name.endswith("_paper")]}),
        "copyright_traps": (traps, {"pdd_copyright_traps": list(traps)}),
        "mimir": (
            mimir,
            {"pdd_mimir": list(mimir), "pdd_mimir_sok": [name for name in mimir if name not in MIMIR_NOT_IN_SOK]},
        ),
    }


FAMILIES = _families()


def family_files(folder: str) -> dict[Path, str]:
    """The YAML files of one family: each task's, and each group's (``_<group>.yaml``)."""
    tasks, groups = FAMILIES[folder]
    files = {HERE / folder / f"{name}.yaml": config for name, config in tasks.items()}
    for group, members in groups.items():
        files[HERE / folder / f"_{group}.yaml"] = {"group": group, "task": members, "metadata": {"version": 1.0}}
    return {path: yaml.safe_dump(config, sort_keys=False) for path, config in files.items()}


def main(argv: list[str]) -> int:
    check = "--check" in argv
    differing = []
    for folder in FAMILIES:
        for path, text in family_files(folder).items():
            if check:
                if not path.is_file() or path.read_text() != text:
                    differing.append(path)
            else:
                path.write_text(text)
    for path in differing:
        print(f"{path.relative_to(HERE)} differs from what task_configs/generate.py writes")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
