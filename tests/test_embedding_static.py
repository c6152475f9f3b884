"""The static student (model2vec's method): PCA and Zipf/SIF weighting checked by hand on a
hand-made vocabulary, numpy-only inference, and the sentence-transformers folder it is saved as."""
from __future__ import annotations

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from shrinkbert.core.errors import ShrinkbertError
from fixtures import make_tiny_bert
from shrinkbert.students.static import StaticEmbedder, pca_fit, zipf_ranks, zipf_weights

VOCAB = {"[UNK]": 0, "good": 1, "movie": 2, "bad": 3, "plot": 4}


def word_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer(models.WordLevel(VOCAB, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return tokenizer


def test_zipf_weights_by_hand():
    # ranks 0..3 -> p ~ 1/2, 1/3, 1/4, 1/5 (normalised); weight a / (a + p)
    inverse = np.array([1 / 2, 1 / 3, 1 / 4, 1 / 5])
    p = inverse / inverse.sum()
    np.testing.assert_allclose(zipf_weights(4, sif=0.1), 0.1 / (0.1 + p))
    weights = zipf_weights(1000)
    assert np.all(np.diff(weights) > 0), "a rarer token must weigh more"
    with pytest.raises(ShrinkbertError):
        zipf_weights(4, sif=0)


def test_zipf_ranks_skip_the_unused_slots():
    kept = np.array([True, False, False, True, True])
    assert zipf_ranks(kept).tolist() == [0, 3, 4, 1, 2]


def test_pca_is_the_top_principal_directions():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(50, 6)) * np.array([5, 4, 3, 0.2, 0.1, 0.05])
    reduced, components = pca_fit(vectors, 3)
    centred = vectors - vectors.mean(axis=0)
    _, _, directions = np.linalg.svd(centred, full_matrices=False)
    expected = centred @ directions[:3].T
    signs = np.sign((reduced * expected).sum(axis=0))  # a component's sign is arbitrary
    np.testing.assert_allclose(reduced * signs, expected, atol=1e-4)
    np.testing.assert_allclose(components * signs[:, None], directions[:3], atol=1e-5)
    # fitted on some rows, applied to all: the held-out rows use the fitted mean and directions
    fit = np.arange(50) < 40
    part, _ = pca_fit(vectors, 2, fit_rows=fit)
    mean = vectors[fit].mean(axis=0)
    _, _, fitted = np.linalg.svd(vectors[fit] - mean, full_matrices=False)
    expected = (vectors - mean) @ fitted[:2].T
    np.testing.assert_allclose(part * np.sign((part * expected).sum(axis=0)), expected, atol=1e-4)
    with pytest.raises(ShrinkbertError, match="--dim"):
        pca_fit(vectors, 7)


def test_inference_is_the_normalised_mean_of_token_vectors():
    table = np.arange(20, dtype=np.float32).reshape(5, 4) - 7
    student = StaticEmbedder(table, word_tokenizer())
    vectors = student.encode(["good movie", "bad", "movie movie good", "", "unknownword plot"])
    by_hand = [table[1] + table[2], table[3], 2 * table[2] + table[1], np.zeros(4), table[0] + table[4]]
    for got, want in zip(vectors, by_hand):
        norm = np.linalg.norm(want)
        np.testing.assert_allclose(got, want / norm if norm else want, atol=1e-6)
    assert vectors.dtype == np.float32


def test_tuning_turns_sentences_towards_their_targets():
    rng = np.random.default_rng(2)
    student = StaticEmbedder(rng.normal(size=(5, 4)).astype(np.float32), word_tokenizer())
    sentences = ["good movie", "bad plot", "good plot", "bad movie", "movie"]
    targets = rng.normal(size=(5, 4)).astype(np.float32)

    def agreement():
        return float(np.mean(np.sum(student.encode(sentences) * (targets / np.linalg.norm(targets, axis=1,
                                                                                           keepdims=True)), axis=1)))

    before, unk_before = agreement(), student.vectors[0].copy()
    student.tune(sentences, targets, epochs=200, lr=0.05, batch_size=5)
    assert agreement() > before + 0.2
    np.testing.assert_array_equal(student.vectors[0], unk_before)  # [UNK] is in no sentence: untouched
    with pytest.raises(ShrinkbertError, match="5 sentences but 4"):
        student.tune(sentences, targets[:4])


def test_save_load_and_sentence_transformers_agree(tmp_path):
    table = np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32)
    StaticEmbedder(table, word_tokenizer()).save(tmp_path / "static")
    loaded = StaticEmbedder.load(tmp_path / "static")
    texts = ["good movie", "bad plot", "good"]
    np.testing.assert_allclose(loaded.vectors, table)
    st = pytest.importorskip("sentence_transformers")
    theirs = st.SentenceTransformer(str(tmp_path / "static"), device="cpu").encode(texts, convert_to_numpy=True)
    np.testing.assert_allclose(loaded.encode(texts), theirs, atol=1e-6)


def test_distilled_from_a_tiny_teacher(tmp_path):
    teacher = make_tiny_bert(tmp_path / "teacher", hidden=32)
    student = StaticEmbedder.distill(teacher, dim=8)
    assert student.vectors.shape == (student.tokenizer.get_vocab_size(), 8)
    vectors = student.encode(["a good movie", "bad"])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    with pytest.raises(ShrinkbertError, match="--dim"):
        StaticEmbedder.distill(teacher, dim=64)
    tuned = StaticEmbedder.distill(teacher, dim=8, corpus=["a good movie", "the plot was dull"], epochs=1)
    assert not np.allclose(tuned.vectors, student.vectors)
