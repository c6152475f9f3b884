"""Embedding data: scored pairs read with one clear line for each fault; the STS figure (Spearman
of cosine x100) on hand-made and real STS-B rows."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shrinkbert.core.data.load import load_corpus
from shrinkbert.core.scored_pairs import read_scored_pairs
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds.sts import cosine_rows, spearman_x100, sts_spearman

STSB = Path(__file__).resolve().parents[2] / "shared" / "data" / "stsb"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_scored_pairs_read(tmp_path):
    pairs = read_scored_pairs(write(tmp_path / "p.csv", "sentence1,sentence2,score\na b,a c,4.5\nx,y,0\n"))
    assert pairs.first == ["a b", "x"] and pairs.second == ["a c", "y"]
    assert pairs.scores.tolist() == [4.5, 0.0]


@pytest.mark.parametrize("body,message", [
    ("sentence1,sentence2\na,b\n", "no column.*score"),
    ("sentence1,sentence2,score\na,b,5.5\n", "row 2.*outside the declared range 0..5"),
    ("sentence1,sentence2,score\na,b,3\nc,d,-1\n", "row 3.*outside"),
    ("sentence1,sentence2,score\na,b,high\n", "row 2.*not a number"),
    ("", "is empty"),
])
def test_bad_pairs_files_are_one_line(tmp_path, body, message):
    with pytest.raises(ShrinkbertError, match=message) as caught:
        read_scored_pairs(write(tmp_path / "p.csv", body))
    assert "\n" not in str(caught.value)


def test_a_declared_range_is_honoured(tmp_path):
    path = write(tmp_path / "p.csv", "sentence1,sentence2,score\na,b,0.5\n")
    assert read_scored_pairs(path, score_range=(0, 1)).scores.tolist() == [0.5]
    with pytest.raises(ShrinkbertError, match="0..0.4"):
        read_scored_pairs(path, score_range=(0, 0.4))


def test_an_empty_text_file_is_one_line(tmp_path):
    with pytest.raises(ShrinkbertError, match="is empty"):
        load_corpus([str(write(tmp_path / "corpus.txt", "\n  \n"))])


def test_spearman_of_cosine_by_hand():
    a = np.array([[1, 0], [1, 0], [1, 0], [0, 2.0]])
    b = np.array([[1, 0], [1, 1], [0, 1], [0, 1.0]])
    np.testing.assert_allclose(cosine_rows(a, b), [1, np.sqrt(0.5), 0, 1])
    assert spearman_x100([0.1, 0.2, 0.3], [1, 2, 3]) == pytest.approx(100)
    assert spearman_x100([0.3, 0.2, 0.1], [1, 2, 3]) == pytest.approx(-100)


def test_sts_embeds_each_sentence_once_on_real_rows(tmp_path):
    if not STSB.is_dir():
        pytest.skip(f"the shared STS-B copy is not at {STSB}")
    lines = (STSB / "test.csv").read_text().splitlines()[:61]
    pairs = read_scored_pairs(write(tmp_path / "slice.csv", "\n".join(lines) + "\n"))
    assert len(pairs.scores) == 60 and pairs.scores.min() >= 0 and pairs.scores.max() <= 5
    seen = []

    def encode(texts):  # bag-of-letters vectors: crude, but similar sentences share letters
        seen.extend(texts)
        return np.array([[t.lower().count(c) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts], float)

    score = sts_spearman(encode, pairs)
    assert len(seen) == len(set(seen)) == len(set(pairs.first + pairs.second))
    assert 0 < score < 100


def test_the_spearman_drop_and_its_bootstrap_se_on_hand_made_vectors():
    from shrinkbert.core.scored_pairs import ScoredPairs
    from shrinkbert.core.kinds.sts import distinct_sentences, pairs_spearman, spearman_drop

    # four pairs whose cosines rank exactly as the gold scores: Spearman 100
    angles = {"a": 0.0, "b": 0.3, "c": 0.9, "d": 1.4, "e": 2.0}
    pairs = ScoredPairs(["a", "a", "a", "a"], ["b", "c", "d", "e"], np.array([4.0, 3.0, 2.0, 1.0]))
    rows = distinct_sentences(pairs)
    assert rows == ["a", "b", "c", "d", "e"]
    fp32 = np.array([[np.cos(angles[t]), np.sin(angles[t])] for t in rows])
    assert pairs_spearman(fp32, pairs) == pytest.approx(100.0)
    swapped = fp32[[0, 2, 1, 3, 4]]  # b and c trade places: the first two pairs' ranks swap
    assert pairs_spearman(swapped, pairs) == pytest.approx(80.0)  # 1 - 6*2/(4*15) = 0.8
    drop, se = spearman_drop(fp32, swapped, pairs)
    assert drop == pytest.approx(20.0) and se > 0
    assert spearman_drop(fp32, fp32, pairs) == (0.0, 0.0)


def test_the_paired_spearman_interval_tells_a_real_gap_from_noise():
    from shrinkbert.core.kinds.sts import spearman_difference

    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 400)
    sharp, blurred = gold + rng.normal(0, 0.5, 400), gold + rng.normal(0, 3.0, 400)
    difference, low, high = spearman_difference(sharp, blurred, gold, resamples=500)
    assert low > 0 and low < difference < high  # a clearly better model: the whole interval above zero
    other_sharp = gold + rng.normal(0, 0.5, 400)  # as good, other noise: the interval straddles zero
    _, low, high = spearman_difference(sharp, other_sharp, gold, resamples=500)
    assert low < 0 < high
    assert spearman_difference(sharp, sharp, gold, resamples=50) == (0.0, 0.0, 0.0)
