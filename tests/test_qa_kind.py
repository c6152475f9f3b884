"""The qa task kind: SQuAD data through load_task, windows, losses and scoring on a tiny random BERT."""
import json
from pathlib import Path

import numpy as np
import pytest

from shrinkbert.core.errors import ShrinkbertError

SQUAD_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "squad"
pytestmark = pytest.mark.skipif(not SQUAD_DIR.is_dir(), reason="../shared/data/squad is absent (it is on CI)")


def subset(name: str, articles: int, per_paragraph: int = 1, paragraphs: int = 3) -> dict:
    """A small SQuAD JSON of the first questions of the first articles of a shared file."""
    parsed = json.loads((SQUAD_DIR / name).read_text())
    data = [{"title": a["title"], "paragraphs": [{"context": p["context"], "qas": p["qas"][:per_paragraph]}
                                                 for p in a["paragraphs"][:paragraphs]]} for a in parsed["data"][:articles]]
    return {"version": parsed["version"], "data": data}


@pytest.fixture(scope="module")
def squad_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("qa") / "squad-small.json"
    path.write_text(json.dumps(subset("squad-dev-v1.1.json", articles=12, per_paragraph=2)))
    return path


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from shrinkbert.core.builtin import minilm_path

    return AutoTokenizer.from_pretrained(str(minilm_path()), use_fast=True)


def tiny_qa_model(tokenizer, seed=0):
    import torch
    from transformers import BertConfig, BertForQuestionAnswering

    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=512, num_labels=2)
    return BertForQuestionAnswering(config)


def test_load_task_reads_squad_as_qa_split_by_article(squad_file):
    from shrinkbert.core.data.load import load_task

    task, splits = load_task(str(squad_file), split_seed=0)
    assert task.kind == "qa" and task.metrics == ("squad",) and task.num_labels == 2
    titles = {name: set(split["title"]) for name, split in splits.items()}
    assert titles["train"].isdisjoint(titles["test"] | titles["validation"]) and titles["test"]
    assert sum(len(s) for s in splits.values()) == 12 * 3 * 2
    again, stored = load_task(str(squad_file), split_seed=0)
    assert stored["test"]["id"] == splits["test"]["id"]


def test_v2_file_gets_squad_v2_metrics(tmp_path):
    from shrinkbert.core.data.load import load_task

    path = tmp_path / "v2.json"
    path.write_text(json.dumps(subset("squad-dev-v2.0.json", articles=6, per_paragraph=20, paragraphs=2)))
    task, splits = load_task(str(path))
    assert task.kind == "qa" and task.metrics == ("squad_v2",)
    assert any(not a["text"] for split in splits.values() for a in split["answers"])


def test_bad_squad_file_through_load_task_is_one_line_and_stores_nothing(tmp_path, cache_env):
    from shrinkbert.core.data.load import load_task

    data = subset("squad-dev-v1.1.json", articles=3)
    data["data"][1]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] += 3
    qid = data["data"][1]["paragraphs"][0]["qas"][0]["id"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ShrinkbertError) as err:
        load_task(str(path))
    assert str(path) in str(err.value) and qid in str(err.value) and "\n" not in str(err.value)
    assert not (cache_env / "tasks").exists() or not any((cache_env / "tasks").iterdir())


def test_windows_losses_and_scoring_on_a_tiny_model(squad_file, tokenizer):
    import torch

    from shrinkbert.core.data.load import load_task
    from shrinkbert.core.kinds import kind_of

    task, splits = load_task(str(squad_file))
    kind = kind_of(task)
    data = kind.tokenize(splits, tokenizer, task, max_length=96)
    assert {"start_positions", "end_positions"} <= set(data["train"].column_names)
    assert "offset_mapping" not in data["train"].column_names and "offset_mapping" in data["test"].column_names
    assert len(data["test"]) > len(splits["test"])  # long contexts made several windows

    student, teacher = tiny_qa_model(tokenizer, 0), tiny_qa_model(tokenizer, 1)
    rows = data["train"].select(range(8))
    width = max(len(ids) for ids in rows["input_ids"])
    batch = {c: torch.tensor([list(v) + [0] * (width - len(v)) for v in rows[c]])
             for c in ("input_ids", "attention_mask", "token_type_ids")}
    batch.update({c: torch.tensor(rows[c]) for c in ("start_positions", "end_positions")})
    inputs = {c: batch[c] for c in ("input_ids", "attention_mask", "token_type_ids")}
    with torch.no_grad():
        taught = kind.outputs(teacher(**inputs), batch)
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-2)
    losses = []
    for _ in range(15):
        out = kind.outputs(student(**inputs), batch)
        loss = 0.5 * kind.hard_loss(out, batch) + 0.5 * kind.kd_loss(out, taught, batch, temperature=2.0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] * 0.8
    # KD of a model with itself is zero; padding never counts.
    assert float(kind.kd_loss(taught, taught, batch, 2.0)) == pytest.approx(0.0, abs=1e-5)

    scores = kind.score_split(student, data["test"], None, task, batch_size=16)
    assert set(scores) >= {"exact_match", "f1", "loss"} and 0.0 <= scores["f1"] <= 100.0


def oracle_logits(windows):
    """Logits that put each window's gold start/end (or [CLS]) far ahead of the rest."""
    width = max(len(ids) for ids in windows["input_ids"])
    starts, ends = np.zeros((len(windows), width)), np.zeros((len(windows), width))
    for i, (s, e) in enumerate(zip(windows["start_positions"], windows["end_positions"])):
        starts[i, s] += 10.0
        ends[i, e] += 10.0
    return starts, ends


def test_gold_positions_score_full_marks(squad_file, tokenizer, tmp_path):
    from shrinkbert.core.data.load import load_task
    from shrinkbert.core.kinds import kind_of

    task, splits = load_task(str(squad_file))
    kind = kind_of(task)
    windows = kind.tokenize(splits["test"], tokenizer, task, max_length=96)
    scores = kind.score_windows(windows, *oracle_logits(windows), task)
    assert scores["f1"] > 95.0 and scores["exact_match"] > 85.0

    v2 = tmp_path / "v2.json"
    v2.write_text(json.dumps(subset("squad-dev-v2.0.json", articles=6, per_paragraph=20, paragraphs=2)))
    task2, splits2 = load_task(str(v2))
    windows2 = kind.tokenize(splits2["test"], tokenizer, task2, max_length=96)
    scores2 = kind.score_windows(windows2, *oracle_logits(windows2), task2)
    assert scores2["NoAns_total"] > 0 and scores2["HasAns_total"] > 0
    assert scores2["best_f1"] >= scores2["f1"] and scores2["best_f1"] > 90.0


def test_encode_gives_model_inputs_and_scored_rows_are_real_tokens(squad_file, tokenizer):
    from shrinkbert.core.data.load import load_task
    from shrinkbert.core.kinds import kind_of

    task, splits = load_task(str(squad_file))
    kind = kind_of(task)
    rows = kind.rows(splits["test"].select(range(3)), task)
    encoded = kind.encode(tokenizer, rows, max_length=96)
    assert set(encoded) == {"input_ids", "attention_mask", "token_type_ids"}
    windows, width = encoded["input_ids"].shape
    logits = np.random.default_rng(0).normal(size=(windows, width, 2))
    scored = kind.scored_logits(logits, encoded)
    assert scored.shape == (int(encoded["attention_mask"].sum()), 2)
    with pytest.raises(ShrinkbertError, match="question-answering model"):
        kind.scored_logits(logits[..., 0], encoded)
