"""The static predictor's fast token ids (compress/token_ids.py): whole-word lookups give exactly
tokenizers' encode ids, on real text of several styles and on the characters where the two could
part; tokenizers it does not cover, and texts it cannot take, go through encode."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

from shrinkbert.compress.token_ids import WordIds, splits_at_whitespace

STSB = Path(__file__).resolve().parents[2] / "shared" / "data" / "stsb" / "test.csv"
# where a word-by-word reading could part from encode: BERT's normalizer deletes \x0b, \x0c and
# \x1c-\x1f (str.split splits at them), added tokens inside words, accents, CJK, other whitespace
TRICKY = ["hello\x0bworld", "a\x0cb c\x1fd", "[MASK] is a [mask]", "x[SEP]y [UNK]", "tab\tand\nnewline\r end",
          "Café naïve résumé", "中文字符 mixed", "no\u00a0break\u2028line", "  padded   spaces  ", "", " ",
          "don't stop: U.S.A. 3.14 e-mail@host.com (ok)?!", "ALL CAPS Words", "a\x01b control", "unaffable" * 5]


@pytest.fixture(scope="module")
def minilm_tokenizer() -> Tokenizer:
    from shrinkbert.core.builtin import minilm_path

    tokenizer = Tokenizer.from_file(str(minilm_path() / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()  # as the static predictor reads it: a mean has no length limit
    return tokenizer


def real_lines() -> list[str]:
    """Sentences of several styles: STS-B test pairs (news, captions, forums) where ../shared is
    beside the clone, and the kit's own parity texts."""
    from shrinkbert.core.parity_texts import PARITY_SENTENCES

    lines = list(PARITY_SENTENCES)
    if STSB.is_file():
        with open(STSB, newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                lines += [row["sentence1"], row["sentence2"]]
    return lines


def test_word_lookups_give_encodes_ids_on_real_and_tricky_text(minilm_tokenizer):
    word_ids = WordIds(minilm_tokenizer)
    assert word_ids.by_word  # BERT's normalizer and pre-tokenizer: the fast path is on
    texts = real_lines() + TRICKY
    expected = [minilm_tokenizer.encode(text, add_special_tokens=False).ids for text in texts]
    assert [word_ids(text) for text in texts] == expected
    assert word_ids.batch(texts) == expected  # the batch path, mixed fitting and not
    assert word_ids(texts[0]) == expected[0]  # from the cache this time
    fitting = sum(word_ids.fits(text) for text in texts)
    assert fitting > 0.9 * len(texts)  # the lookups did the work: real text is mostly ASCII
    assert not word_ids.fits("hello\x0bworld") and not word_ids.fits("Café")


def test_a_tokenizer_that_truncates_or_pads_goes_through_encode(minilm_tokenizer):
    truncating = Tokenizer.from_str(minilm_tokenizer.to_str())
    truncating.enable_truncation(4)
    word_ids = WordIds(truncating)
    assert not word_ids.by_word
    text = "a sentence of rather more than four tokens"
    assert word_ids(text) == truncating.encode(text, add_special_tokens=False).ids and len(word_ids(text)) == 4


def test_a_byte_level_bpe_tokenizer_is_not_read_word_by_word():
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(real_lines()[:400] + TRICKY, trainers.BpeTrainer(vocab_size=300, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    assert not splits_at_whitespace(tokenizer)  # its pieces carry the space before a word
    word_ids = WordIds(tokenizer)
    texts = real_lines()[:50] + TRICKY
    assert [word_ids(t) for t in texts] == [tokenizer.encode(t, add_special_tokens=False).ids for t in texts]


def test_an_added_token_that_strips_spaces_sends_only_the_texts_holding_it_through_encode(minilm_tokenizer):
    """MPNet's tokenizer is BERT's with `<mask>` stripping the space before it: its texts without the
    token are read word by word, those with it (in any case) through encode, and every id is encode's."""
    tokenizer = Tokenizer.from_str(minilm_tokenizer.to_str())
    tokenizer.add_special_tokens([AddedToken("<mask>", lstrip=True), AddedToken("<wide>", rstrip=True)])
    word_ids = WordIds(tokenizer)
    assert word_ids.by_word
    holding = ["a <mask> b", "a<mask>b", "the <MASK>  end", "x <wide> y", "<mask>"]
    texts = real_lines()[:100] + TRICKY + holding
    assert [word_ids(t) for t in texts] == [tokenizer.encode(t, add_special_tokens=False).ids for t in texts]
    assert word_ids.batch(texts) == [tokenizer.encode(t, add_special_tokens=False).ids for t in texts]
    assert not any(word_ids.fits(t) for t in holding) and word_ids.fits("a plain sentence")


def test_the_cache_stays_bounded(minilm_tokenizer, monkeypatch):
    from shrinkbert.compress import token_ids

    monkeypatch.setattr(token_ids, "MAX_WORDS", 10)
    word_ids = WordIds(minilm_tokenizer)
    text = " ".join(f"word{i}" for i in range(40))
    assert word_ids(text) == minilm_tokenizer.encode(text, add_special_tokens=False).ids
    assert len(word_ids.words) == 40
    word_ids("another few words")  # over MAX_WORDS: started afresh
    assert sorted(word_ids.words) == ["another", "few", "words"]
