"""Write the pdd_wikimia25 task YAMLs and group (run from this directory: python _generate_configs.py).

The Hub dataset card (SimMIA/WikiMIA-25) declares four splits, ``data/<split>-*.parquet``, with
columns ``input`` (the text) and ``label`` (1 = member, 0 = non-member).
"""

from pathlib import Path

import yaml


SPLITS = {  # task suffix: Hub split
    "32": "WikiMIA_length32",
    "64": "WikiMIA_length64",
    "128": "WikiMIA_length128",
    "paper": "paper_subset",
}
GROUPED = ("32", "64", "128")  # paper_subset is the paper's own selection: a task of its own
HERE = Path(__file__).parent


def main() -> None:
    for suffix, split in SPLITS.items():
        label = f"length {suffix}" if suffix in GROUPED else "paper subset"
        config = {
            "include": "_default_template_yaml",
            "task": f"pdd_wikimia25_{suffix}",
            "test_split": split,
            "metadata": {
                "version": 1.0,
                "dataset_label": f"WikiMIA-25 ({label})",
                "data_source": "hub",
                "text_field": "input",
                "label_field": "label",
            },
        }
        (HERE / f"pdd_wikimia25_{suffix}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    group = {"group": "pdd_wikimia25", "task": [f"pdd_wikimia25_{s}" for s in GROUPED], "metadata": {"version": 1.0}}
    (HERE / "_pdd_wikimia25.yaml").write_text(yaml.safe_dump(group, sort_keys=False))


if __name__ == "__main__":
    main()
