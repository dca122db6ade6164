"""Writes the task YAMLs of the families made from a list, with their group files: WikiMIA-24,
WikiMIA paraphrased and WikiMIA-25 (one task per text length), Copyright Traps (one per split),
MIMIR (one per domain; groups ``pdd_mimir`` and the SoK's ``pdd_mimir_sok``) and OLMo-Detect (one per
pre- and mid-training subset; groups ``pdd_olmo_detect`` and ``pdd_olmo_detect_shifted``).

    python task_configs/generate.py            # rewrite the YAMLs
    python task_configs/generate.py --check    # list the YAMLs that differ from what it would write

``tests/tasks/test_tasks.py`` runs the check, so a YAML edited by hand without this file fails the tests.
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
#: OLMo-Detect: the layout of github.com/ted-tennis/OLMo-Detect at commit 8ed11cd (its README and file
#: list): benchmark/<stage>/<domain>/member/{matched,shifted}/test/member_<stage>_<subset>_<setting>_test.jsonl
#: and .../non-member/test/non-member_<stage>_<subset>_test.jsonl (shared by both settings), one JSON
#: object per line, the text in ``text``. Task suffix: (stage, domain folder, subset, has a shifted
#: setting). GSM8K has no matched/shifted level (its members: member/test/member_midtraining_gsm8k_test.jsonl).
OLMO_DETECT_SUBSETS = {
    "dclm": ("pretraining", "dclm", "dclm", True),
    "pes2o": ("pretraining", "pes2o", "pes2o", True),
    "openwebmath": ("pretraining", "openwebmath", "openwebmath", True),
    "starcoder_python": ("pretraining", "starcoder", "starcoder_python", True),
    "starcoder_java": ("pretraining", "starcoder", "starcoder_java", True),
    "gsm8k": ("midtraining", "gsm8k", "gsm8k", False),
    "stackexchange_math": ("midtraining", "stackexchange", "stackexchange_math", True),
    "stackexchange_stackoverflow": ("midtraining", "stackexchange", "stackexchange_stackoverflow", True),
}
OLMO_DETECT_SOURCE = "https://github.com/ted-tennis/OLMo-Detect (folder benchmark/; commit 8ed11cd)"
OLMO_DETECT_HUB_NOTE = (
    "the Hub dataset TedSSS/OLMo-Detect is not read: its card and file layout could not be checked; these "
    "tasks read the layout of the authors' GitHub repository"
)


def olmo_detect_tasks(setting: str) -> dict[str, dict]:
    """One task per OLMo-Detect subset in ``setting`` (``matched``: ``pdd_olmo_detect_<subset>``;
    ``shifted``: ``pdd_olmo_detect_shifted_<subset>``), on the subset's test files."""
    tasks = {}
    for suffix, (stage, domain, subset, has_shifted) in OLMO_DETECT_SUBSETS.items():
        if setting == "shifted" and not has_shifted:
            continue
        folder = f"benchmark/{stage}/{domain}"
        if has_shifted:
            member = f"{folder}/member/{setting}/test/member_{stage}_{subset}_{setting}_test.jsonl"
        else:
            member = f"{folder}/member/test/member_{stage}_{subset}_test.jsonl"
        name = f"pdd_olmo_detect_{suffix}" if setting == "matched" else f"pdd_olmo_detect_shifted_{suffix}"
        tasks[name] = {
            "include": "_default_template_yaml",
            "task": name,
            "metadata": {
                "version": 1.0,
                "dataset_label": f"OLMo-Detect {stage} {subset} ({setting}, test)",
                "source_url": OLMO_DETECT_SOURCE,
                "hub_note": OLMO_DETECT_HUB_NOTE,
                "data_source": "hub",
                "schema": "member_nonmember",
                "text_field": "text",
                "hub_files": {
                    "member": member,
                    "nonmember": f"{folder}/non-member/test/non-member_{stage}_{subset}_test.jsonl",
                },
            },
        }
    return tasks


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
    olmo_detect = olmo_detect_tasks("matched")
    olmo_detect_shifted = olmo_detect_tasks("shifted")
    return {
        "wikimia24": (wikimia24, {"pdd_wikimia24": list(wikimia24)}),
        "wikimia_paraphrased": (paraphrased, {"pdd_wikimia_paraphrased": list(paraphrased)}),
        "wikimia25": (wikimia25, {"pdd_wikimia25": [name for name in wikimia25 if not name.endswith("_paper")]}),
        "copyright_traps": (traps, {"pdd_copyright_traps": list(traps)}),
        "mimir": (
            mimir,
            {"pdd_mimir": list(mimir), "pdd_mimir_sok": [name for name in mimir if name not in MIMIR_NOT_IN_SOK]},
        ),
        "olmo_detect": (
            olmo_detect | olmo_detect_shifted,
            {"pdd_olmo_detect": list(olmo_detect), "pdd_olmo_detect_shifted": list(olmo_detect_shifted)},
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
