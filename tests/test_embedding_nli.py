"""`shrinkbert finetune --mode embeddings` on an NLI task, through the stage every kind uses: in-batch
negatives (MultipleNegativesRankingLoss's form) on the entailment pairs, judged by triplet accuracy on the
validation split; bad input in one line."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fixtures import make_tiny_bert, run_cli, tiny_sentences, write_tiny_csv
from shrinkbert.core.artifacts import read_manifest
from shrinkbert.core.kinds.embedding import nli_triplets, triplet_accuracy

LABELS = ("entailment", "neutral", "contradiction")


def _nli_dir(where: Path, labels=LABELS) -> Path:
    """train/validation/test csv files of premise,hypothesis,label: every premise with one hypothesis per label."""
    texts = [text for text, _ in tiny_sentences(40, seed=11)]
    where.mkdir()
    for split, start in (("train", 0), ("validation", 12), ("test", 24)):
        rows = ["premise,hypothesis,label"]
        for i in range(start, start + 12, 3):
            rows += [f"{texts[i]},{texts[i + 1 + k]},{label}" for k, label in enumerate(labels)]
        (where / f"{split}.csv").write_text("\n".join(rows) + "\n")
    return where


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return make_tiny_bert(tmp_path_factory.mktemp("nli") / "tiny", hidden=32, layers=1, intermediate=64)


def test_triplet_accuracy_on_hand_made_vectors():
    triplets = nli_triplets(["p", "p", "q", "q", "r"], ["e1", "c1", "e2", "c2", "e3"],
                            ["entailment", "contradiction", "entailment", "contradiction", "entailment"])
    assert triplets == [("p", "e1", "c1"), ("q", "e2", "c2")]  # r has no contradiction: no triplet
    vectors = {"p": [1, 0], "e1": [0.8, 0.6], "c1": [0, 1],        # p: entailed closer (0.8 > 0)
               "q": [0, 1], "e2": [1, 0], "c2": [0.6, 0.8]}        # q: contradiction closer (0 < 0.8)
    anchors, positives, negatives = (np.array([vectors[t[i]] for t in triplets], dtype=np.float32) for i in range(3))
    assert triplet_accuracy(anchors, positives, negatives) == 0.5


def test_in_batch_negatives_loss_matches_sentence_transformers():
    """The loss the NLI path trains with is MultipleNegativesRankingLoss's: cross-entropy over 20 x cosine."""
    import torch

    from shrinkbert.core.kinds.losses import in_batch_negatives_loss

    torch.manual_seed(0)
    anchors, positives = torch.randn(4, 8), torch.randn(4, 8)
    cosines = torch.nn.functional.cosine_similarity(anchors[:, None], positives[None], dim=-1)
    expected = torch.nn.functional.cross_entropy(20 * cosines, torch.arange(4))
    assert torch.allclose(in_batch_negatives_loss(anchors, positives), expected, atol=1e-5)
    assert in_batch_negatives_loss(anchors, anchors * 3) < in_batch_negatives_loss(anchors, positives)


def test_finetune_mode_embeddings_trains_on_the_entailment_pairs(model, tmp_path):
    from sentence_transformers import SentenceTransformer

    nli = _nli_dir(tmp_path / "nli")
    done = run_cli(["finetune", "--mode", "embeddings", "--model", str(model), "--task", str(nli), "--text-column",
                    "premise", "--text-pair-column", "hypothesis", "--epochs", "1", "--batch-size", "2",
                    "--output-dir", str(tmp_path / "out")], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = read_manifest(tmp_path / "out")
    assert manifest["kind"] == "embedding" and manifest["stage"] == "finetune"
    assert manifest["metrics"]["train_examples"] == 4  # the train split's entailment rows only
    assert manifest["config"]["task"] == str(nli)  # recorded where a later reader finds it
    assert manifest["metrics"]["validation_examples"] == 4  # the validation split's triplets
    assert 0 <= manifest["metrics"]["validation_triplet_accuracy"] <= 1
    assert 0 <= manifest["metrics"]["test_triplet_accuracy"] <= 1
    assert manifest["task"]["metrics"] == ["triplet_accuracy"]
    assert not manifest.get("data")  # NLI rows are not the scored pairs later embedding stages inherit
    vectors = SentenceTransformer(str(tmp_path / "out"), device="cpu").encode(["a good film"])
    assert vectors.shape == (1, 32)


@pytest.mark.parametrize("case", ["sentiment", "no-entailment", "one-entailment-pair"])
def test_finetune_mode_embeddings_refuses_what_is_not_nli_in_one_line(model, tmp_path, case):
    pair_args = ["--text-column", "premise", "--text-pair-column", "hypothesis"]
    if case == "sentiment":
        args, expected = ["--task", str(write_tiny_csv(tmp_path / "reviews.csv", n=48))], "entailment label"
    elif case == "no-entailment":
        nli = _nli_dir(tmp_path / "nli", labels=("neutral", "contradiction", "neutral"))
        args, expected = ["--task", str(nli), *pair_args], "entailment label"
    else:  # entailment is a label (validation has it) but train holds one such row: no in-batch negative
        nli = _nli_dir(tmp_path / "nli")
        train = (nli / "train.csv").read_text()
        first = train.index(",entailment") + len(",entailment")
        (nli / "train.csv").write_text(train[:first] + train[first:].replace(",entailment", ",neutral"))
        args, expected = ["--task", str(nli), *pair_args], "at least 2 entailment pairs, got 1"
    done = run_cli(["finetune", "--mode", "embeddings", "--model", str(model), *args, "--output-dir",
                    str(tmp_path / "out")], tmp_path)
    assert done.returncode == 2 and done.stderr.strip().startswith("error: ") and expected in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
