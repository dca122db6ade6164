"""``lm-eval-pdd estimate-table``: a frequency table without a corpus, an ESTIMATE from a
word-frequency list (:mod:`pdd_tasks.freq.estimates`), or uniform.

    lm-eval-pdd estimate-table --tokenizer T --from {wordfreq,jieba,uniform} --output X.npz
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pdd_tasks.tools.arg_types import positive_float
from pdd_tasks.tools.commands._tables import add_output, err, failed, finish, load_tokenizer, need_output


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tokenizer", required=True, metavar="NAME_OR_PATH")
    parser.add_argument(
        "--from",
        dest="source",
        required=True,
        choices=("wordfreq", "jieba", "uniform"),
        help="wordfreq: a wordfreq word list (--language); jieba: jieba's Chinese dictionary; "
        "uniform: all counts equal (no calibration)",
    )
    parser.add_argument("--language", default="en", help="wordfreq language, e.g. en or zh (default en)")
    parser.add_argument("--wordlist", default="best", help="wordfreq list: best, large or small (default best)")
    parser.add_argument(
        "--scale", type=positive_float, default=1e9, help="wordfreq: nominal corpus size in words (default 1e9)"
    )
    parser.add_argument(
        "--jieba-dict", type=Path, default=None, help="jieba: a dictionary file (default: jieba's dict.txt)"
    )
    parser.add_argument("--tokenizer-name", default=None)
    add_output(parser)


def run(args: argparse.Namespace) -> int:
    from pdd_tasks.freq.estimates import estimate_table, jieba_word_counts, uniform_table, wordfreq_word_counts

    command = "estimate-table"
    if not need_output(args, command, inputs=[args.jieba_dict] if args.jieba_dict else []):
        return 1
    tokenizer = load_tokenizer(args.tokenizer)
    name = args.tokenizer_name or args.tokenizer
    try:
        if args.source == "uniform":
            table = uniform_table(tokenizer, name)
        elif args.source == "wordfreq":
            pairs, desc = wordfreq_word_counts(args.language, args.wordlist, args.scale)
            table = estimate_table(pairs, tokenizer, desc, args.language, name)
        else:
            pairs, desc = jieba_word_counts(args.jieba_dict)
            table = estimate_table(pairs, tokenizer, desc, "zh", name)
    except (ValueError, FileNotFoundError) as exc:
        return failed(command, str(exc))
    err(f"{table.description}; coverage {table.coverage:.2%}")
    return finish(table, args.output, args.install, args.force, command)
