"""Dataset names resolved offline: the data folders named by $SHRINKBERT_DATA, laid out as the hub names datasets.

A name that is neither a built-in nor an existing path is looked up in each folder of
$SHRINKBERT_DATA (several separated by ":", the first that holds it wins) before the hub is tried.
It is tried as written, then without its owner (the part before the first "/"):

    sentence-transformers/stsb   <DATA>/sentence-transformers/stsb/, else <DATA>/stsb/
    squad, rajpurkar/squad       <DATA>/squad/
    squad/squad-dev-v1.1.json    <DATA>/squad/squad-dev-v1.1.json   (one file, named inside its folder)

NAME:SPLIT names one split's file of a folder (`snli:test`, `stsb:train`), a named folder or a local
one. A folder's files map to splits by their names (userdata.files_by_split): train.*, validation.*
(or dev.*), test.*, or names that hold the split as a word, as SQuAD's train-v1.1.json and
dev-v1.1.json. A task read from a folder with no train file but one split file reads that file,
split by the kit (SQuAD's dev file alone); an option that reads one file (a corpus, --retrieval,
--nli) takes a folder's one split file, and asks for NAME:SPLIT when there are several.

What is read is identified by content (load.py names stored splits by the files' hashes), so the
same files in another data folder, or reached by path, share one store.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.userdata import SPLIT_NAMES, files_by_split, split_files

DATA_ENV = "SHRINKBERT_DATA"
SPLIT_SUFFIX = re.compile(r"^(?P<base>[^:]+):(?P<split>[A-Za-z]+)$")


def data_folders() -> list[Path]:
    """The folders of $SHRINKBERT_DATA, in order (os.pathsep-separated; empty entries skipped)."""
    value = os.environ.get(DATA_ENV, "")
    return [Path(part).expanduser() for part in value.split(os.pathsep) if part.strip()]


def searched() -> str:
    """Where a name was looked for, for an error line: '$SHRINKBERT_DATA: /a, /b' or that it is unset."""
    folders = data_folders()
    if not folders:
        return f"${DATA_ENV} is not set"
    return f"${DATA_ENV}: {', '.join(str(folder) for folder in folders)}"


def split_suffix(name: str) -> tuple[str, str | None]:
    """('snli', 'test') for 'snli:test' (any alias: 'stsb:dev' -> validation); (name, None) without a suffix."""
    found = SPLIT_SUFFIX.match(name)
    if not found:
        return name, None
    word = found["split"].lower()
    for split, aliases in SPLIT_NAMES.items():
        if word in aliases:
            return found["base"], split
    raise ShrinkbertError(f"'{name}': '{found['split']}' is not a split (name one of train, validation, test)")


def _candidates(name: str) -> list[str]:
    """The name as written, then without its owner ('sentence-transformers/stsb' -> 'stsb')."""
    return [name, name.split("/", 1)[1]] if "/" in name.strip("/") else [name]


def _find_base(name: str) -> Path | None:
    own = Path(name).expanduser()
    if own.exists():
        return own
    if name.startswith((".", "/", "~")) or not name.strip():  # a path the user spelled out: not a name
        return None
    for folder in data_folders():
        for candidate in _candidates(name):
            if (folder / candidate).exists():
                return folder / candidate
    return None


def find(name: str) -> Path | None:
    """The path a data name stands for: an existing path as it is, else its entry in the first data
    folder that holds it, with a :SPLIT suffix that split's file; None when it is neither.

    Raises:
        ShrinkbertError: a :SPLIT suffix that is no split, or that the folder has no file for.
    """
    base, split = split_suffix(str(name))
    path = _find_base(base)
    if path is None or split is None:
        return path
    if not path.is_dir():
        raise ShrinkbertError(f"'{name}': {path} is a file, not a folder of split files")
    files = files_by_split(path)
    if split not in files:
        held = ", ".join(files) or "none named by split"
        raise ShrinkbertError(f"'{name}': {path} has no {split} file (its splits: {held})")
    return files[split]


def not_found(name: str, what: str = "data") -> ShrinkbertError:
    """The one error line for a name found nowhere: what was tried, and the data folders searched."""
    return ShrinkbertError(f"{what} '{name}' is not an existing file or folder, nor in the data folders "
                           f"({searched()}): set {DATA_ENV} to the folder that holds it, or give its path")


def one_file(path: Path, name: str) -> Path:
    """A file as it is; a folder's one split file. Raises ShrinkbertError for a folder of several
    splits (naming NAME:SPLIT for each) or of none."""
    if path.is_file():
        return path
    files = files_by_split(path)
    if len(files) == 1:
        return next(iter(files.values()))
    if not files:
        raise ShrinkbertError(f"'{name}': {path} holds no file named by split (train.*, validation.*, test.*)")
    raise ShrinkbertError(f"'{name}' is a folder of {len(files)} splits ({path}); name one: "
                          + ", ".join(f"{name}:{split}" for split in files))


def data_file(name: str, what: str) -> Path:
    """The one file an option names (a path, NAME, NAME:SPLIT or NAME/FILE); `what` names the option in errors."""
    path = find(name)
    if path is None:
        raise not_found(name, what)
    return one_file(path, name)


def task_path(path: Path, name: str) -> Path:
    """What a task reads at `path`: a file; a folder with a train file; a folder with no train file
    and a single split file, that file (split by the kit). Raises ShrinkbertError otherwise."""
    if path.is_file():
        return path
    files = files_by_split(path)
    if not files:
        split_files(path)  # raises: its error says what a folder of splits holds
    if "train" in files:
        return path
    if len(files) == 1:
        return next(iter(files.values()))
    raise ShrinkbertError(f"{path} holds no train file; name one of its splits to split it: "
                          + ", ".join(f"{name}:{split}" for split in files))
