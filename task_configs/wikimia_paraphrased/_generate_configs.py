"""Write the pdd_wikimia_paraphrased task YAMLs and group (run from this directory)."""

from pathlib import Path

import yaml


LENGTHS = (32, 64, 128)  # the paraphrased splits published by the Min-K%++ authors
HERE = Path(__file__).parent


def main() -> None:
    for n in LENGTHS:
        config = {
            "include": "_default_template_yaml",
            "task": f"pdd_wikimia_paraphrased_{n}",
            "test_split": f"WikiMIA_length{n}_paraphrased",
            "metadata": {
                "version": 1.0,
                "dataset_label": f"WikiMIA paraphrased (length {n})",
                "data_source": "hub",
                "text_field": "input",
                "label_field": "label",
            },
        }
        (HERE / f"pdd_wikimia_paraphrased_{n}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    group = {
        "group": "pdd_wikimia_paraphrased",
        "task": [f"pdd_wikimia_paraphrased_{n}" for n in LENGTHS],
        "metadata": {"version": 1.0},
    }
    (HERE / "_pdd_wikimia_paraphrased.yaml").write_text(yaml.safe_dump(group, sort_keys=False))


if __name__ == "__main__":
    main()
