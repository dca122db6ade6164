"""Chinese text for pdd tasks: word-level snippets cut with jieba.

The DC-PDD paper builds PatentMIA from Chinese patent pages and scores the first 512 words of each
page, words being what the ``jieba`` segmenter returns. Its reference code
(github.com/zhang-wei-chao/DC-PDD, ``com_det_sco.py``, ``--lang cn``) does this as
``"".join(jieba.lcut(text)[:512])``. :func:`first_n_words` is that rule, usable for any Chinese
benchmark of your own:

>>> from pdd_tasks.loading.chinese import first_n_words
>>> first_n_words("本发明公开了一种图像识别方法。", 3)
'本发明公开了'

Conventions (those of the reference code):

- jieba's default ("accurate") mode with its HMM for unknown words (``jieba.lcut(text)``);
- every token jieba returns counts as a word, punctuation and whitespace included;
- a snippet is the concatenation of the first n tokens, i.e. a prefix of the original text, unchanged
  (jieba's tokens concatenate back to the input);
- a text of n words or fewer is returned whole.

The command ``lm-eval-pdd zh-snippets --input pages.jsonl --output snippets.jsonl``
(:mod:`pdd_tasks.tools.commands.zh_snippets`) writes the first 512 jieba words of every text of a
JSONL file (other fields kept), ready for ``pdd_custom`` or as a PatentMIA-style local file.
"""

from __future__ import annotations

import functools
import logging


PAPER_WORDS = 512  # DC-PDD (Zhang et al. 2024), PatentMIA: the first 512 jieba words of each page

__all__ = ["PAPER_WORDS", "count_words", "first_n_words", "jieba_words", "snippets"]


@functools.lru_cache(maxsize=1)
def _jieba():
    try:
        import jieba
    except ImportError as error:  # a declared dependency; say how to get it back
        raise ImportError("Chinese word segmentation needs jieba: pip install 'jieba>=0.42'.") from error
    jieba.setLogLevel(logging.WARNING)  # no "Building prefix dict ..." chatter on every run
    return jieba


def jieba_words(text: str) -> list[str]:
    """The words of ``text`` as jieba segments it (accurate mode, HMM on); ``"".join`` of the
    result is ``text`` itself.

    >>> jieba_words("子曰：学而时习之")[:3]
    ['子', '曰', '：']
    """
    if not isinstance(text, str):
        raise TypeError(f"expected a str, got {type(text).__name__}")
    return _jieba().lcut(text)


def count_words(text: str) -> int:
    """Number of jieba words of ``text`` (punctuation and whitespace tokens included).

    >>> count_words("本发明公开了一种图像识别方法。")
    7
    """
    return len(jieba_words(text))


def check_n(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ValueError(f"n={n!r}: expected a positive number of words, e.g. {PAPER_WORDS} as in DC-PDD.")


def first_n_words(text: str, n: int = PAPER_WORDS) -> str:
    """The first ``n`` jieba words of ``text``, as a prefix of the original text.

    DC-PDD (Zhang et al., EMNLP 2024), Sec. 4.1: PatentMIA texts are the first 512 words of each
    patent page; reference code ``"".join(jieba.lcut(text)[:max_cha])``. Texts of ``n`` words or
    fewer are returned unchanged.

    >>> first_n_words("有朋自远方来，不亦乐乎？", 2)
    '有朋自远方来，'
    >>> first_n_words("短文本", 512)
    '短文本'
    """
    check_n(n)
    return "".join(jieba_words(text)[:n])


def snippets(text: str, n: int = PAPER_WORDS) -> list[str]:
    """``text`` cut into consecutive snippets of ``n`` jieba words (the last may be shorter); they
    concatenate back to ``text``. For building several snippets per page.

    >>> snippets("本发明公开了一种图像识别方法。", 3)
    ['本发明公开了', '一种图像识别方法', '。']
    """
    check_n(n)
    words = jieba_words(text)
    return ["".join(words[start : start + n]) for start in range(0, len(words), n)]
