"""Chinese word-level snippets with jieba (PatentMIA's "first 512 words" rule), on real Chinese text.

Texts: the opening of the Analects (论语·学而, 1.1) and of the Dao De Jing (道德经, chapters 1-2),
classical Chinese in the public domain; and patent-style paragraphs written for these tests in the
wording of Chinese patent abstracts ("本发明公开了一种……").
"""

from __future__ import annotations

import doctest
import json

import pytest

import pdd_tasks.loading.chinese
from pdd_tasks.loading.chinese import PAPER_WORDS, count_words, first_n_words, jieba_words, snippets
from pdd_tasks.tools.cli import main as lm_eval_pdd


ANALECTS = "子曰：学而时习之，不亦说乎？有朋自远方来，不亦乐乎？人不知而不愠，不亦君子乎？"
DAODEJING = (
    "道可道，非常道。名可名，非常名。无名天地之始；有名万物之母。故常无欲，以观其妙；常有欲，以观其徼。"
    "此两者，同出而异名，同谓之玄。玄之又玄，众妙之门。"
    "天下皆知美之为美，斯恶已。皆知善之为善，斯不善已。故有无相生，难易相成，长短相形，高下相倾，"
    "音声相和，前后相随。是以圣人处无为之事，行不言之教。"
)
PATENT = (
    "本发明公开了一种基于深度学习的图像识别方法，包括以下步骤：获取待识别图像；对所述图像进行预处理；"
    "将预处理后的图像输入训练好的卷积神经网络模型，得到识别结果。本发明能够提高识别的准确率，"
    "并降低对计算资源的需求。"
)


def test_module_doctests():
    result = doctest.testmod(pdd_tasks.loading.chinese)
    assert result.attempted >= 6 and result.failed == 0


def test_words_are_jieba_words_and_concatenate_back():
    words = jieba_words(ANALECTS)
    assert words[:6] == ["子", "曰", "：", "学而", "时习", "之"]
    assert "".join(words) == ANALECTS
    patent = jieba_words(PATENT)
    assert "".join(patent) == PATENT
    assert {"本发明", "深度", "学习", "图像识别", "卷积", "神经网络"} <= set(patent)
    assert len(patent) < len(PATENT) * 0.7  # words, not characters


def test_first_n_words_is_a_prefix_of_n_words():
    assert first_n_words(ANALECTS, 4) == "子曰：学而"
    assert first_n_words(PATENT, 5) == "本发明公开了一种基于"
    for n in (1, 7, 20):
        cut = first_n_words(DAODEJING, n)
        assert DAODEJING.startswith(cut)
        assert cut == "".join(jieba_words(DAODEJING)[:n])  # the DC-PDD reference code's rule


def test_first_512_words_of_a_long_page():
    page = "\n".join([DAODEJING, PATENT, ANALECTS] * 8)  # a page longer than 512 words
    words = jieba_words(page)
    assert len(words) > PAPER_WORDS
    cut = first_n_words(page)  # default: 512, as in the paper
    assert cut == "".join(words[:PAPER_WORDS])
    assert page.startswith(cut) and len(cut) < len(page)
    assert "\n" in cut  # whitespace tokens count as words and are kept, as in the reference code


def test_short_text_is_kept_whole_and_bad_n_is_refused():
    assert first_n_words(ANALECTS, 512) == ANALECTS
    assert first_n_words(ANALECTS, count_words(ANALECTS)) == ANALECTS
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="positive number of words"):
            first_n_words(ANALECTS, bad)
    with pytest.raises(TypeError):
        jieba_words(None)


def test_snippets_cover_the_page_in_order():
    parts = snippets(DAODEJING, 10)
    assert "".join(parts) == DAODEJING
    assert parts[0] == first_n_words(DAODEJING, 10)
    assert len(parts) == -(-count_words(DAODEJING) // 10)


def test_command_cuts_each_record_and_keeps_other_fields(tmp_path, capsys):
    pages = tmp_path / "pages.jsonl"
    pages.write_text(
        "\n".join(
            json.dumps({"id": i, "content": t, "label": i % 2}, ensure_ascii=False)
            for i, t in enumerate([ANALECTS, PATENT, "短文"])
        ),
        encoding="utf-8",
    )
    out = tmp_path / "snippets.jsonl"
    assert (
        lm_eval_pdd(
            ["zh-snippets", "--input", str(pages), "--output", str(out), "--text-field", "content", "--words", "5"]
        )
        == 0
    )
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["content"] for r in written] == [first_n_words(ANALECTS, 5), first_n_words(PATENT, 5), "短文"]
    assert [(r["id"], r["label"]) for r in written] == [(0, 0), (1, 1), (2, 0)]
    assert "子曰" in out.read_text(encoding="utf-8")  # readable UTF-8, not \\u escapes
    assert "2 cut to 5 jieba words" in capsys.readouterr().err


def test_command_names_a_missing_text_field(tmp_path, capsys):
    pages = tmp_path / "pages.jsonl"
    pages.write_text(json.dumps({"body": ANALECTS}, ensure_ascii=False) + "\n", encoding="utf-8")
    assert lm_eval_pdd(["zh-snippets", "--input", str(pages), "--output", str(tmp_path / "o.jsonl")]) == 1
    assert (
        "pages.jsonl:1: no text field 'text' (fields: ['body']); name it with --text-field" in capsys.readouterr().err
    )
