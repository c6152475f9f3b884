"""SQuAD-style QA data: the formats read, the split by article, and every bad input as one line."""
import json
from pathlib import Path

import pytest

from shrinkbert.core.qa_data import read_qa_file, read_qa_splits
from shrinkbert.core.errors import ShrinkbertError

SQUAD_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "squad"
needs_squad = pytest.mark.skipif(not SQUAD_DIR.is_dir(), reason="../shared/data/squad is absent (it is on CI)")

CONTEXT = "The Normans gave their name to Normandy, a region in France."


def nested(*qas, version="1.1", titles=("Normans",)):
    return {"version": version, "data": [{"title": title, "paragraphs": [{"context": CONTEXT, "qas": list(qas)}]}
                                         for title in titles]}


def qa(qid="q1", question="Who named Normandy?", text="The Normans", start=0, **extra):
    answers = [] if text is None else [{"text": text, "answer_start": start}]
    return {"id": qid, "question": question, "answers": answers, **extra}


def write(tmp_path, name, content) -> Path:
    path = tmp_path / name
    if name.endswith(".jsonl"):
        path.write_text("".join(json.dumps(row) + "\n" for row in content))
    else:
        path.write_text(json.dumps(content))
    return path


def flat(qid="q1", text="The Normans", start=0, title="Normans", **extra):
    row = {"id": qid, "title": title, "context": CONTEXT, "question": "Who named Normandy?",
           "answers": {"text": [text] if text else [], "answer_start": [start] if text else []}}
    row.update(extra)
    return row


def test_nested_and_flat_files_read_to_the_same_rows(tmp_path):
    from_nested = read_qa_file(write(tmp_path, "a.json", nested(qa(), qa("q2", text="France", start=53)))).to_list()
    from_jsonl = read_qa_file(write(tmp_path, "b.jsonl", [flat(), flat("q2", "France", 53)])).to_list()
    from_json = read_qa_file(write(tmp_path, "c.json", [flat(), flat("q2", "France", 53)])).to_list()
    assert from_nested == from_jsonl == from_json
    assert from_nested[1]["answers"] == {"text": ["France"], "answer_start": [53]}


def test_parquet_in_the_hub_layout(tmp_path):
    import datasets

    path = tmp_path / "train.parquet"
    datasets.Dataset.from_list([flat(), flat("q2", "France", 53)]).to_parquet(str(path))
    rows = read_qa_file(path)
    assert rows["id"] == ["q1", "q2"] and rows[1]["answers"]["text"] == ["France"]


@pytest.mark.parametrize("name, content, message", [
    ("moved.json", nested(qa(start=4)), "question 'q1': answer 'The Normans' is not at answer_start 4"),
    ("noctx.jsonl", [flat(context="  ")], "question 'q1' has no context"),
    ("noq.json", nested(qa(question="")), "question 'q1' has no question"),
    ("v1.json", nested(qa(), qa("q2", text=None)), "question 'q2' has no answer, but the file is read as SQuAD v1.1"),
    ("v1flat.jsonl", [flat(), flat("q9", text=None)], "question 'q9' has no answer, but the file is read as SQuAD v1.1"),
    ("dup.json", nested(qa(), qa()), "question 'q1' appears twice"),
    ("dupflat.jsonl", [flat(), flat("q1", "France", 53)], "question 'q1' appears twice"),
])
def test_bad_input_is_one_line_naming_file_and_question(tmp_path, name, content, message):
    path = write(tmp_path, name, content)
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(ShrinkbertError) as err:
        read_qa_splits(path)
    assert message in str(err.value) and str(path) in str(err.value)
    assert "\n" not in str(err.value)
    assert sorted(tmp_path.rglob("*")) == before  # nothing written


def test_v2_file_allows_unanswerable_questions(tmp_path):
    path = write(tmp_path, "v2.json", nested(qa(), qa("q2", text=None, is_impossible=True), version="v2.0"))
    assert read_qa_file(path)[1]["answers"]["text"] == []
    with pytest.raises(ShrinkbertError, match="read as SQuAD v1.1"):
        read_qa_file(path, version_2_with_negative=False)
    flat_path = write(tmp_path, "v2.jsonl", [flat(), flat("q2", text=None)])
    assert read_qa_file(flat_path, version_2_with_negative=True)[1]["answers"]["text"] == []


def test_one_file_is_split_by_article_with_the_seed(tmp_path):
    titles = [f"article{i}" for i in range(20)]
    content = {"version": "1.1", "data": [
        {"title": t, "paragraphs": [{"context": CONTEXT, "qas": [qa(f"{t}-{j}") for j in range(3)]}]} for t in titles]}
    path = write(tmp_path, "one.json", content)
    splits = read_qa_splits(path, seed=0)
    by_split = {name: set(split["title"]) for name, split in splits.items()}
    assert by_split["train"].isdisjoint(by_split["validation"] | by_split["test"])
    assert by_split["validation"].isdisjoint(by_split["test"])
    assert sum(len(s) for s in splits.values()) == 60 and all(len(s) >= 3 for s in splits.values())
    assert read_qa_splits(path, seed=0)["test"]["id"] == splits["test"]["id"]
    assert read_qa_splits(path, seed=1)["test"]["id"] != splits["test"]["id"]


def test_a_directory_of_split_files(tmp_path):
    data = tmp_path / "squad"
    data.mkdir()
    write(data, "train.jsonl", [flat(f"t{i}", title=f"a{i}") for i in range(10)])
    write(data, "validation.json", nested(qa("v1"), titles=("held",)))
    splits = read_qa_splits(data)
    assert splits["validation"]["id"] == ["v1"]
    assert len(splits["train"]) + len(splits["test"]) == 10 and len(splits["test"]) >= 1
    write(data, "test.jsonl", [flat("t3", title="x")])
    with pytest.raises(ShrinkbertError, match="question 't3' is in both the train and the test split"):
        read_qa_splits(data)


@needs_squad
def test_real_squad_splits_keep_articles_apart():
    for name, questions in (("squad-dev-v1.1.json", 9065), ("squad-dev-v2.0.json", 11067)):
        splits = read_qa_splits(SQUAD_DIR / name, seed=0)
        assert sum(len(s) for s in splits.values()) == questions
        train, test = set(splits["train"]["title"]), set(splits["test"]["title"])
        assert train and test and train.isdisjoint(test) and train.isdisjoint(splits["validation"]["title"])
