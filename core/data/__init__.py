"""The data room inside core: tasks, the data spec, the built-in tasks' rows, stored splits.

    from shrinkbert.core.data.load import load_task, tokenize_task
    task, splits = load_task("movie-snippets")          # also: from shrinkbert.core.data import load_task

The modules, lowest first; each imports only modules listed above it, the task kinds (core/kinds)
and core's own modules. The readers below the kinds live in core itself (core/userdata.py: a
user's files; datafolder.py, qa_data.py, scored_pairs.py, builtin.py: the built-in archives;
cache.py; catalogue.py: the built-in tasks' declarations), so the kinds read rows with them and
this package asks the kinds, and no import points back.

  brown_tags    Brown corpus tags -> the 12 universal tags
  leakguard     the filter that keeps validation/test text (and near-duplicates) out of training text
  tasks         Task: a task's declaration (labels, pair, metrics, kind); the built-in tasks
  builtin_data  the built-in tasks' rows and corpora, read from the built-in archives
  dataspec      DataSpec: the data fields every stage shares (core.configs.DataConfig), inherited along the lineage;
                load_splits(spec): the stored splits of a spec (imports load when called); split_pairs
  load          load_task, tokenize_task, load_corpus: seeded splits, stored once

This file imports none of them: the names below are looked up on first use (PEP 562), so
importing a light module of the package (tasks, dataspec) does not import `datasets`. Code inside
shrinkbert imports from the module itself (tests/test_imports.py checks it), so the import graph
it checks for circles has every edge.
"""
from __future__ import annotations

import importlib

# name -> the module of this package that defines it
_EXPORTS = {
    "load_task": "load", "load_splits": "dataspec", "tokenize_task": "load", "load_corpus": "load",
    "limit_rows": "load", "make_splits": "load", "default_cache_dir": "load",
    "Task": "tasks", "BUILTIN_TASKS": "tasks", "DataSpec": "dataspec",
    "resolve_spec": "dataspec", "LeakGuard": "leakguard",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
