"""Dataset names resolved offline from the data folders of $SHRINKBERT_DATA (core/datafolder.py).

A name that is neither a built-in nor an existing path is looked up in each data folder, as written and
without its owner; NAME:SPLIT picks one split's file; the stored splits are named by the files' hashes,
so the same files in another folder share a store; a name found nowhere is one error line naming the
folders searched. The shipped recipes' names resolve against the shared copies (../shared/data).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from conftest import shared_data
from fixtures import write_tiny_csv
from shrinkbert.core.data import load as data
from shrinkbert.core.datafolder import DATA_ENV, data_file, find, task_path
from shrinkbert.core.data.load import load_corpus, load_task
from shrinkbert.core.data.tasks import BUILTIN_TASKS
from shrinkbert.core.errors import ShrinkbertError

ROOT = Path(__file__).resolve().parents[1]


def _split_folder(folder: Path, splits=("train", "validation", "test")) -> Path:
    folder.mkdir(parents=True)
    for seed, split in enumerate(splits):
        write_tiny_csv(folder / f"{split}.csv", n=32, seed=seed)
    return folder


def _squad_file(path: Path, version: str) -> Path:
    article = {"title": "T", "paragraphs": [{"context": "A cat sat.", "qas": [
        {"id": f"q-{version}", "question": "Who sat?", "answers": [{"text": "A cat", "answer_start": 0}]}]}]}
    path.write_text(json.dumps({"version": version, "data": [article]}))
    return path


@pytest.fixture()
def data_dir(tmp_path, monkeypatch) -> Path:
    """An empty data folder, the only one in $SHRINKBERT_DATA, and the working directory elsewhere."""
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv(DATA_ENV, str(folder))
    monkeypatch.chdir(tmp_path)
    return folder


def test_a_hub_name_resolves_to_its_full_path_or_its_last_part(data_dir):
    full = _split_folder(data_dir / "sentence-transformers" / "stsb")
    assert find("sentence-transformers/stsb") == full
    other = _split_folder(data_dir / "snli")
    assert find("stanfordnlp/snli") == other and find("snli") == other  # the owner dropped, or never given
    assert find("nobody/absent") is None and find("absent") is None


def test_a_squad_folder_reads_its_dev_file_alone_or_the_official_train_and_dev_files(data_dir):
    squad = data_dir / "squad"
    squad.mkdir()
    v1 = _squad_file(squad / "squad-dev-v1.1.json", "1.1")
    _squad_file(squad / "squad-dev-v2.0.json", "v2.0")  # another version of the same split: the lowest is read
    _squad_file(squad / "xquad-en.json", "1.1")  # names no split: not read
    assert find("squad") == find("rajpurkar/squad") == squad
    assert task_path(find("squad"), "squad") == v1  # one dev file, no train file: that file, split by article
    assert data_file("squad", "--retrieval") == v1 and find("squad:validation") == find("squad:dev") == v1

    official = data_dir / "official" / "squad"
    official.mkdir(parents=True)
    train, dev = _squad_file(official / "train-v1.1.json", "1.1"), _squad_file(official / "dev-v1.1.json", "1.1")
    assert task_path(official, "squad") == official  # a train file: the folder's own splits
    assert find(f"{official}:train") == train and find(f"{official}:validation") == dev


def test_a_split_or_file_suffix_names_one_file(data_dir):
    _split_folder(data_dir / "snli", splits=("validation", "test"))
    (data_dir / "squad").mkdir()
    _squad_file(data_dir / "squad" / "squad-dev-v1.1.json", "1.1")
    assert find("snli:test") == data_dir / "snli" / "test.csv"
    assert find("stanfordnlp/snli:validation") == data_dir / "snli" / "validation.csv"
    assert find("squad/squad-dev-v1.1.json") == data_dir / "squad" / "squad-dev-v1.1.json"
    assert data_file("snli:test", "--nli") == data_dir / "snli" / "test.csv"
    with pytest.raises(ShrinkbertError, match=r"name one: snli:validation, snli:test"):
        data_file("snli", "--nli")  # two splits: which one is the user's to say
    with pytest.raises(ShrinkbertError, match="no train file; name one of its splits"):
        load_task("snli")
    with pytest.raises(ShrinkbertError, match=r"'snli:train': .* has no train file \(its splits: validation, test\)"):
        find("snli:train")
    with pytest.raises(ShrinkbertError, match="'sample' is not a split"):
        find("snli:sample")
    lines = load_corpus("snli:validation")  # a corpus entry: the file's text columns
    assert lines and len(lines) == len(set(lines))


def test_the_folders_of_the_variable_are_searched_in_order(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    _split_folder(second / "stsb")
    monkeypatch.setenv(DATA_ENV, os.pathsep.join([str(first), str(second)]))  # the first does not even exist
    assert find("sentence-transformers/stsb") == second / "stsb"
    _split_folder(first / "stsb")
    assert find("sentence-transformers/stsb") == first / "stsb"  # both hold it: the first wins


def test_a_name_found_nowhere_is_one_line_naming_the_folders_searched(tmp_path, monkeypatch):
    folders = [tmp_path / "a", tmp_path / "b"]
    monkeypatch.setenv(DATA_ENV, os.pathsep.join(map(str, folders)))
    monkeypatch.chdir(tmp_path)
    expected = f"$SHRINKBERT_DATA: {folders[0]}, {folders[1]}"
    for call in (lambda: load_task("someone/absent-set"), lambda: load_task("absent/file.json"),
                 lambda: load_corpus("absent:validation"), lambda: data_file("absent", "--retrieval")):
        with pytest.raises(ShrinkbertError) as caught:
            call()
        assert expected in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(ShrinkbertError, match="hub"):  # with no such folder the hub is still tried
        load_task("someone/absent-set")
    monkeypatch.delenv(DATA_ENV)
    with pytest.raises(ShrinkbertError, match=r"\$SHRINKBERT_DATA is not set"):
        data_file("absent", "--nli")


def test_the_same_files_in_another_folder_reuse_the_stored_splits(tmp_path, monkeypatch):
    one, two = tmp_path / "one", tmp_path / "two"
    _split_folder(one / "reviews")
    _split_folder(two / "reviews")  # the same bytes (same seeds) under another data folder
    cache = tmp_path / "cache"
    monkeypatch.setenv(DATA_ENV, str(one))
    task, splits = load_task("someone/reviews", cache_dir=str(cache))
    stores = list((cache / "tasks").iterdir())
    assert len(stores) == 1 and task.name == "reviews"
    monkeypatch.setenv(DATA_ENV, str(two))
    monkeypatch.setattr(data, "_build", lambda *a, **k: pytest.fail("rebuilt instead of reusing the stored splits"))
    again_task, again = load_task("reviews", cache_dir=str(cache))
    assert again_task == task and list((cache / "tasks").iterdir()) == stores
    assert again["test"]["text"] == splits["test"]["text"]
    load_task(str(two / "reviews"), cache_dir=str(cache))  # by path: the same store too
    assert list((cache / "tasks").iterdir()) == stores


def _recipe_data_names(path: Path) -> list[tuple[str, str]]:
    """(option, name) of every dataset a recipe names: task, corpus entries, retrieval, nli."""
    names = []
    for stage in yaml.safe_load(path.read_text())["stages"].values():
        params = stage.get("with") or {}
        for key in ("task", "retrieval", "nli"):
            if params.get(key):
                names.append((key, str(params[key])))
        corpus = params.get("corpus") or []
        for entry in (corpus.split(",") if isinstance(corpus, str) else corpus):
            names.append(("corpus", entry.strip()))
    return names


def test_the_recipes_name_data_as_users_have_it_and_the_names_resolve_from_the_shared_copies(monkeypatch):
    from shrinkbert.core.data.builtin_data import CORPORA

    monkeypatch.setenv(DATA_ENV, str(shared_data()))
    recipes = sorted((ROOT / "recipes").glob("*.yaml"))
    for recipe in recipes:
        assert "../shared" not in recipe.read_text(), f"{recipe.name} names a path outside the repository"
    named = {(recipe.name, key, name) for recipe in recipes for key, name in _recipe_data_names(recipe)
             if name not in BUILTIN_TASKS and name not in CORPORA}
    hub_only = {("bert-base-sst2.yaml", "task", "stanfordnlp/sst2")}  # the recipe for a machine with the hub
    assert {"squad", "sentence-transformers/stsb", "snli:test", "snli:validation", "stsb:train"} <= {
        name for _, _, name in named}
    for recipe, key, name in sorted(named - hub_only):
        found = find(name)
        assert found is not None, f"{recipe}: {key} {name!r} is not in {shared_data()}"
        read = task_path(found, name) if key == "task" else data_file(name, key)
        assert read.is_relative_to(shared_data()), (recipe, name, read)
    assert data_file("squad", "retrieval").name == "squad-dev-v1.1.json"  # the file the recipes were built on
