"""The built-in tasks, declared: name -> the fields of its core.data.tasks.Task.

Plain data, so `--help` can list the names without loading the task kinds (core/data/tasks.py
builds and checks the Task objects). Label names are fixed here so every run agrees on what
index means what; nyt-next-sentence puts "is_next" at index 1 so F1 measures the positive class.
"""
from __future__ import annotations

BUILTIN_TASK_SPECS: dict[str, dict] = {
    "movie-snippets": dict(label_names=("negative", "positive"), metrics=("accuracy", "f1")),
    "bbc-news": dict(label_names=("business", "entertainment", "politics", "sports", "tech")),
    "nyt-next-sentence": dict(label_names=("not_next", "is_next"), pair=True, metrics=("accuracy", "f1")),
    "imdb": dict(label_names=("negative", "positive"), metrics=("accuracy", "f1")),
    # The 12 universal tags of Petrov, Das & McDonald (2012), mapped from the Brown tagset.
    "brown-pos": dict(label_names=("ADJ", "ADP", "ADV", "CONJ", "DET", "NOUN", "NUM", "PRON", "PRT", "VERB", "X",
                                   "."), metrics=("accuracy",), kind="token"),
    # WNUT-16 Twitter NER (training split), BIO over 10 entity types: O first, then B-/I- per type.
    "wnut16-ner": dict(label_names=("O",) + tuple(f"{p}-{t}" for t in (
        "company", "facility", "geo-loc", "movie", "musicartist", "other", "person", "product", "sportsteam",
        "tvshow") for p in ("B", "I")), metrics=("seqeval", "accuracy"), kind="token"),
}
