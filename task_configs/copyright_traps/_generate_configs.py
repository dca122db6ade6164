"""Write the pdd_copyright_traps task YAMLs and group (run from this directory: python _generate_configs.py).

The Hub dataset card (imperial-cpg/copyright-traps) declares nine splits ``seq_len_<L>_n_rep_<R>``
(L = 25, 50, 100 tokens; R = 10, 100, 1000 repetitions of each member in CroissantLLM's training
data), ``data/<split>-*``, with columns ``perplexity_bucket``, ``text`` and ``label`` (1 = member).
"""

from pathlib import Path

import yaml


LENGTHS = (25, 50, 100)
REPETITIONS = (10, 100, 1000)
HERE = Path(__file__).parent


def main() -> None:
    names = []
    for length in LENGTHS:
        for reps in REPETITIONS:
            name = f"pdd_copyright_traps_{length}_{reps}"
            config = {
                "include": "_default_template_yaml",
                "task": name,
                "test_split": f"seq_len_{length}_n_rep_{reps}",
                "metadata": {
                    "version": 1.0,
                    "dataset_label": f"Copyright Traps ({length} tokens, {reps} repetitions)",
                    "data_source": "hub",
                    "text_field": "text",
                    "label_field": "label",
                },
            }
            (HERE / f"{name}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
            names.append(name)
    group = {"group": "pdd_copyright_traps", "task": names, "metadata": {"version": 1.0}}
    (HERE / "_pdd_copyright_traps.yaml").write_text(yaml.safe_dump(group, sort_keys=False))


if __name__ == "__main__":
    main()
