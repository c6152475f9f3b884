"""The documents of an index a drop-in query encoder serves, and the queries it learns from.

    from shrinkbert.students.documents import read_documents, split_documents, query_pairs
    documents = read_documents("docs.jsonl,imdb")
    training, held_out = split_documents(documents, held_out=1000)
    pairs = query_pairs(training, generated=2, seed=0)   # (query, its document) rows

Sources (comma-separated, as --corpus names them):
- `.jsonl`: one document a line, its text in "text" (or "document", "passage", "contents", "body");
  optional "title" (a query it answers), "queries" (a list, or "query": the query log's queries whose
  answer it is) and "group" (documents kept on the same side of the held-out split, e.g. one source file).
- SQuAD files (`.json`, `.parquet`, or `.jsonl` rows with "question" and "context"): every paragraph of
  the training half of its articles (core/qa_data.article_half; the other half is what eval's
  --retrieval-articles held-out searches, so it is never trained on) is a document, its questions are
  its queries, its article its group.
- anything else --corpus reads (built-in corpora, .txt, .csv; core/data/load.load_corpus): a document a line.

A user with no query log gets queries made from the documents themselves, as unsupervised dense
retrieval does (Inverse Cloze Task's sentences, Contriever's random crops): a sentence of a document
of several, and a span of 4 to 16 of its words; a short document is also a query for itself (the
teacher's vector of it is a target as the vectors objective's are).
"""
from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from shrinkbert.core.errors import ShrinkbertError

TEXT_FIELDS = ("text", "document", "passage", "contents", "body")
SPAN_WORDS = (4, 16)    # a cropped span's length in words, drawn uniformly
SHORT_DOCUMENT = 48     # words: a document this short is a query for itself too
MIN_SENTENCE_WORDS = 4  # a shorter sentence is not a query of its own
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")


@dataclass
class Documents:
    """Documents, what keeps each on one side of a split (`groups`), and each one's own queries."""
    texts: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    queries: list[list[str]] = field(default_factory=list)

    def add(self, text: str, group: str | None = None, queries: list[str] | None = None) -> None:
        self.texts.append(text)
        self.groups.append(group if group is not None else text)
        self.queries.append([" ".join(q.split()) for q in queries or [] if q and q.strip()])

    def subset(self, rows: list[int]) -> "Documents":
        return Documents([self.texts[r] for r in rows], [self.groups[r] for r in rows],
                         [self.queries[r] for r in rows])

    def __len__(self) -> int:
        return len(self.texts)


@dataclass
class QueryPairs:
    """Training or held-out rows: each query and the row of the document it was made from (or asked of)."""
    queries: list[str]
    documents: list[int]
    origins: list[str]  # "log" (a query of the document's own), "sentence", "span" or "itself"

    def subset(self, rows: list[int]) -> "QueryPairs":
        return QueryPairs([self.queries[r] for r in rows], [self.documents[r] for r in rows],
                          [self.origins[r] for r in rows])

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for origin in self.origins:
            found[origin] = found.get(origin, 0) + 1
        return found


def read_documents(sources: str, max_documents: int = 0, seed: int = 0) -> Documents:
    """The distinct documents of the comma-separated `sources` (a document read twice, as SQuAD v1.1 and
    v2.0 share paragraphs, keeps the queries of both); with max_documents, an equal share of them from
    each source (a seeded sample), so a small corpus of the user's own is not crowded out."""
    names = [name.strip() for name in sources.split(",") if name.strip()]
    if not names:
        raise ShrinkbertError("a drop-in student learns the teacher's ranking of an index's documents: give "
                              "--corpus (a .jsonl of documents, a SQuAD file, .txt files or built-in corpora)")
    share = -(-max_documents // len(names)) if max_documents else 0
    documents, seen = Documents(), {}
    for name in names:
        found = _read_source(name)
        order = list(range(len(found)))
        if share and len(order) > share:
            random.Random(seed).shuffle(order)
            order = sorted(order[:share])
        for row in order:
            text = found.texts[row]
            if text in seen:
                known = documents.queries[seen[text]]
                known += [query for query in found.queries[row] if query not in known]
                continue
            seen[text] = len(documents)
            documents.add(text, found.groups[row], found.queries[row])
    if len(documents) < 2:
        raise ShrinkbertError(f"--corpus {sources}: {len(documents)} distinct document(s); an index needs more")
    return documents


def _read_source(name: str) -> Documents:
    from shrinkbert.core.data import builtin_data
    from shrinkbert.core.datafolder import find
    from shrinkbert.core.qa_data import QA_SUFFIXES

    path = None if name in builtin_data.CORPORA else find(name)
    if path is not None and path.is_file():
        if path.suffix.lower() == ".jsonl" and not _is_qa_jsonl(path):
            return _read_jsonl(path)
        if path.suffix.lower() in QA_SUFFIXES:
            return _read_squad(path)
    from shrinkbert.core.data.load import load_corpus

    documents = Documents()
    for line in load_corpus(name):
        documents.add(" ".join(line.split()))
    return documents


def _is_qa_jsonl(path: Path) -> bool:
    with open(path, encoding="utf-8-sig") as handle:
        line = next((line for line in handle if line.strip()), "{}")
    try:
        row = json.loads(line)
    except ValueError:
        raise ShrinkbertError(f"--corpus {path}: its first line is not a JSON object") from None
    return isinstance(row, dict) and "question" in row and "context" in row


def _read_jsonl(path: Path) -> Documents:
    documents = Documents()
    with open(path, encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                raise ShrinkbertError(f"--corpus {path}: line {number} is not JSON") from None
            text = next((row[name] for name in TEXT_FIELDS if isinstance(row, dict) and row.get(name)), None)
            if not isinstance(text, str):
                raise ShrinkbertError(f"--corpus {path}: line {number} has no text field (one of "
                                      f"{', '.join(TEXT_FIELDS)})")
            queries = row.get("queries", row.get("query", []))
            queries = [queries] if isinstance(queries, str) else list(queries)
            if isinstance(row.get("title"), str):
                queries.append(row["title"])
            if not all(isinstance(q, str) for q in queries):
                raise ShrinkbertError(f"--corpus {path}: line {number}'s queries are not all strings")
            group = row.get("group")
            documents.add(" ".join(text.split()), str(group) if group is not None else None, queries)
    return documents


def _read_squad(path: Path) -> Documents:
    from shrinkbert.core.qa_data import TRAINING_HALF, article_groups, article_half, read_qa_file

    table = read_qa_file(path)
    by_context: dict[str, tuple[str, list[str]]] = {}
    for article, question, context in zip(article_groups(table), table["question"], table["context"]):
        if article_half(article) == TRAINING_HALF:
            by_context.setdefault(" ".join(context.split()), (article, []))[1].append(question)
    if not by_context:
        raise ShrinkbertError(f"--corpus {path}: no article of the training half (qa_data.article_half) holds a paragraph")
    documents = Documents()
    for context, (article, questions) in by_context.items():
        documents.add(context, f"article:{article}", questions)
    return documents


def split_documents(documents: Documents, held_out: int) -> tuple[Documents, Documents]:
    """(training documents, about `held_out` held-out ones): whole groups, those first by a hash of the
    group's name (the same for every seed and every run), so no held-out article is trained on."""
    if held_out <= 0:
        return documents, Documents()
    order: dict[str, list[int]] = {}
    for row, group in enumerate(documents.groups):
        order.setdefault(group, []).append(row)
    ranked = sorted(order, key=lambda group: hashlib.sha256(group.encode("utf-8")).digest())
    held: list[int] = []
    for group in ranked:
        if len(held) >= held_out:
            break
        held += order[group]
    if len(held) >= len(documents) - 1:
        raise ShrinkbertError(f"{len(documents)} documents in {len(order)} group(s): too few to hold "
                              f"{held_out} out and train on the rest")
    taken = set(held)
    return documents.subset([r for r in range(len(documents)) if r not in taken]), documents.subset(sorted(held))


def query_pairs(documents: Documents, generated: int = 2, seed: int = 0, itself: bool = True) -> QueryPairs:
    """Each document's own queries, then `generated` queries made from it (a sentence, a span, in turn),
    and (itself=True) the document itself when it is short; distinct within a document. A held-out
    measure leaves the document itself out: it finds itself in any index."""
    rng = random.Random(seed)
    pairs = QueryPairs([], [], [])
    for row, text in enumerate(documents.texts):
        made: dict[str, str] = {}
        for query in documents.queries[row]:
            made.setdefault(query, "log")
        words = text.split()
        sentences = [s for s in SENTENCE_END.split(text) if len(s.split()) >= MIN_SENTENCE_WORDS]
        for turn in range(generated):
            if turn % 2 == 0 and len(sentences) > 1:
                made.setdefault(rng.choice(sentences), "sentence")
            elif len(words) > SPAN_WORDS[0]:
                length = min(rng.randint(*SPAN_WORDS), len(words) - 1)
                start = rng.randrange(len(words) - length + 1)
                made.setdefault(" ".join(words[start:start + length]), "span")
        if itself and len(words) <= SHORT_DOCUMENT:
            made.setdefault(text, "itself")
        for query, origin in made.items():
            pairs.queries.append(query)
            pairs.documents.append(row)
            pairs.origins.append(origin)
    return pairs


# the sample of the index (--max-documents) is data, not a run's draw: every seed's student serves the same
# index (and reuses the teacher's vectors of it), and eval finds the same held-out documents
DOCUMENT_SAMPLE_SEED = 0
HELD_OUT_QUERIES = 1000  # held-out queries searched: recall on 1,000 carries about +-1.5 points


def corpus_split(sources: str, max_documents: int, held_out: int) -> tuple[Documents, Documents]:
    """(training documents, held-out documents) of a drop-in --corpus, the same for the distill stage
    and for eval's --documents given the same --max-documents and --held-out-documents."""
    return split_documents(read_documents(sources, max_documents, DOCUMENT_SAMPLE_SEED), held_out)


def held_out_queries(held: Documents, generated: int, seed: int) -> QueryPairs:
    """Up to HELD_OUT_QUERIES queries of the held-out documents: their own, and `generated` (at least 2)
    made from each; never a document itself."""
    return sample_pairs(query_pairs(held, max(generated, 2), seed, itself=False), HELD_OUT_QUERIES, seed)


def sample_pairs(pairs: QueryPairs, limit: int, seed: int) -> QueryPairs:
    """At most `limit` of the rows (0: all), a seeded sample in their order."""
    if not limit or len(pairs.queries) <= limit:
        return pairs
    return pairs.subset(sorted(random.Random(seed).sample(range(len(pairs.queries)), limit)))
