"""What a corpus run asks of a bundle: its own Predictor, the columns it reads, and its answers as Arrow columns.

The bundle's predict.py is loaded from the bundle itself, so a row gets exactly what `Predictor`
returns for it. One small class per kind of answer turns a batch of rows into the output's columns:

- embedding: `embedding`, a fixed_size_list<float32> (or float16) of the bundle's unit vectors;
- sequence: `label`, `score` and `scores` (every label's probability, in the order of the schema's
  "labels" metadata);
- token: `words` (a list of {word, tag, score, start, end}) and `entities` ({entity_group, word, score,
  start, end}, as transformers' token-classification pipeline groups them); a column of word lists is
  tagged word by word (`predict_words`: no offsets, no entities);
- qa: `answer`, a struct {text, start, end, score} (text "" and nulls where a SQuAD v2 bundle finds none).
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from shrinkbert.core.errors import ShrinkbertError

LENGTH_ROWS = 256  # rows whose tokens are counted at once
DTYPES = {"float32": (np.float32, pa.float32()), "float16": (np.float16, pa.float16())}
WORD = pa.struct([("word", pa.string()), ("tag", pa.string()), ("score", pa.float64()), ("start", pa.int64()),
                  ("end", pa.int64())])
ENTITY = pa.struct([("entity_group", pa.string()), ("word", pa.string()), ("score", pa.float64()),
                    ("start", pa.int64()), ("end", pa.int64())])
ANSWER = pa.struct([("text", pa.string()), ("start", pa.int64()), ("end", pa.int64()), ("score", pa.float64())])


@dataclass
class Counted:
    """Rows' token counts and the encodings that counted them (None where the bundle pads nothing)."""
    lengths: list[int]
    encodings: list | None

    def __add__(self, other: "Counted") -> "Counted":
        both = None if self.encodings is None or other.encodings is None else self.encodings + other.encodings
        return Counted(self.lengths + other.lengths, both)


def padded(encodings: list, tokenizer) -> list:
    """`encodings` padded in place to their longest, as `tokenizer`'s own padding pads a batch."""
    padding = tokenizer.padding
    longest = max(len(e.ids) for e in encodings)
    for encoding in encodings:
        encoding.pad(longest, direction=padding["direction"], pad_id=padding["pad_id"],
                     pad_type_id=padding["pad_type_id"], pad_token=padding["pad_token"])
    return encodings


def bundle_identity(bundle: str | Path) -> dict:
    """The bundle's path and the sha256 of its shrinkbert.json (which records every file's sha256), so a
    changed bundle is a different one; a folder without one is hashed file by file."""
    root = Path(bundle)
    digest = hashlib.sha256()
    manifest = root / "shrinkbert.json"
    for file in [manifest] if manifest.is_file() else sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(file.relative_to(root).as_posix().encode() + b"\0" + file.read_bytes())
    return {"path": str(root.resolve()), "sha256": digest.hexdigest()}


def load_predictor(bundle: str | Path, threads: int | None):
    """The bundle's own `Predictor` (its predict.py), with `threads` ONNX Runtime threads (None: the bundle's)."""
    root = Path(bundle)
    script = root / "predict.py"
    if not script.is_file():
        raise ShrinkbertError(f"{bundle} is not a bundle (it has no predict.py): make one with `shrinkbert bundle`")
    name = "_shrinkbert_bundle_" + hashlib.sha1(str(script.resolve()).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        return module.Predictor(root, threads=threads)
    except module.BundleDamaged as err:
        raise ShrinkbertError(str(err)) from err


def kind_of(predictor) -> str:
    """embedding, sequence, token or qa: what the bundle's Predictor answers."""
    return "embedding" if hasattr(predictor, "embed") else predictor.kind


class Outputs:
    """The output columns of one kind; `columns` are the input columns it reads, in order.

    A subclass answers for its kind: which Predictor kind it serves (`kind`), the input columns it reads by
    default (`default_columns`), whether it reads a second text column (`reads_pairs`), whether it can write
    its numbers in another dtype (`dtypes`) and whether its predict runs the counting pass's encodings
    (`reads_encodings`; a kind that does not is handed none, so a window's encodings are not held for it)."""
    columns: list[str]
    kind: str = ""
    default_columns: tuple[str, ...] = ("text",)
    reads_pairs = False
    dtypes: tuple[str, ...] = ("float32",)
    reads_encodings = False

    @classmethod
    def columns_for(cls, text_column: str | None, text_pair_column: str | None, names: list[str]) -> list[str]:
        """The input columns read: those given, else the defaults (`names`: the first input's columns)."""
        if text_pair_column and not cls.reads_pairs:
            raise ShrinkbertError(f"--text-pair-column is for pair classifiers (and a QA bundle's context); this "
                                  f"bundle is a {cls.kind} model")
        return [text_column or cls.default_columns[0]] + ([text_pair_column] if text_pair_column else [])

    def __init__(self, predictor, columns: list[str], dtype: str = "float32"):
        self.predictor, self.columns = predictor, columns
        self.counter = _counting_tokenizer(predictor)

    def count(self, rows: list[dict]) -> Counted:
        """Tokens each row runs as (what a batch pads to), or characters where the bundle has no padding, with
        the unpadded encodings that counted them where the kind reads them (it pads them instead of encoding
        its rows again). Counted LENGTH_ROWS rows at a time: a truncated encoding keeps the rest of its text
        as overflow."""
        first = [r[self.columns[0]] for r in rows]
        if self.counter is None:
            return Counted([len(x) for x in first], None)
        encodings, encode = [], getattr(self.counter, "encode_batch_fast", self.counter.encode_batch)  # no offsets
        for start in range(0, len(rows), LENGTH_ROWS):
            part = first[start:start + LENGTH_ROWS]
            if isinstance(part[0], (list, tuple)):
                encodings.extend(encode([list(x) for x in part], is_pretokenized=True))
            elif len(self.columns) == 2:
                pairs = [r[self.columns[1]] for r in rows[start:start + LENGTH_ROWS]]
                encodings.extend(encode(list(zip(part, pairs))))
            else:
                encodings.extend(encode(part))
        return Counted([len(e.ids) for e in encodings], encodings if self.reads_encodings else None)

    def fields(self) -> list[pa.Field]:
        raise NotImplementedError

    def metadata(self) -> dict[str, str]:
        return {}

    def predict(self, rows: list[dict], encodings: list | None = None) -> dict[str, pa.Array]:
        """The output columns for `rows`, in their order, one Predictor call. `encodings`: the rows' own from
        `count` (unpadded, without offsets), which a kind whose answers need no offsets runs as they are."""
        raise NotImplementedError


class Embeddings(Outputs):
    kind = "embedding"
    dtypes = tuple(DTYPES)

    def __init__(self, predictor, columns, dtype: str = "float32"):
        super().__init__(predictor, columns)
        self.numpy_dtype, self.arrow_dtype = DTYPES[dtype]

    def fields(self):
        return [pa.field("embedding", pa.list_(self.arrow_dtype, self.predictor.dim))]

    @property
    def reads_encodings(self) -> bool:
        return hasattr(self.predictor.graph, "vectors")  # a bundle written before `vectors` encodes again

    def predict(self, rows, encodings=None):
        graph = self.predictor.graph
        if encodings is not None and self.reads_encodings:
            vectors = graph.vectors(padded(encodings, graph.tokenizer))
        else:
            vectors = self.predictor.embed([r[self.columns[0]] for r in rows], batch_size=max(1, len(rows)))
        flat = pa.array(np.ascontiguousarray(vectors, dtype=self.numpy_dtype).ravel(), type=self.arrow_dtype)
        return {"embedding": pa.FixedSizeListArray.from_arrays(flat, self.predictor.dim)}


class Labels(Outputs):
    kind = "sequence"
    reads_pairs = True
    reads_encodings = True

    def fields(self):
        return [pa.field("label", pa.string()), pa.field("score", pa.float64()),
                pa.field("scores", pa.list_(pa.float64()))]

    def metadata(self):
        return {"labels": json.dumps(self.predictor.labels)}

    def predict(self, rows, encodings=None):
        p = self.predictor
        if encodings is None:
            texts = [r[self.columns[0]] for r in rows]
            pairs = [r[self.columns[1]] for r in rows] if len(self.columns) == 2 else None
            encodings = p.encode(list(zip(texts, pairs)) if pairs is not None else texts)
        else:
            encodings = padded(encodings, p.tokenizer)
        # the bundle's own probabilities, then the label and score its predict() picks: the most probable
        probabilities = np.asarray(p.probabilities(encodings), dtype=np.float64)
        best = probabilities.argmax(axis=1)
        return {"label": pa.array(np.asarray(p.labels, dtype=object)[best], pa.string()),
                "score": pa.array(probabilities[np.arange(len(rows)), best], pa.float64()),
                "scores": pa.FixedSizeListArray.from_arrays(pa.array(probabilities.ravel()), probabilities.shape[1])
                .cast(pa.list_(pa.float64()))}


class Tags(Outputs):
    kind = "token"

    @classmethod
    def columns_for(cls, text_column, text_pair_column, names):
        """"text", or "tokens" (word lists) where the input has that and no "text"."""
        if not text_column and "tokens" in names and "text" not in names:
            text_column = "tokens"
        return super().columns_for(text_column, text_pair_column, names)

    def fields(self):
        return [pa.field("words", pa.list_(WORD)), pa.field("entities", pa.list_(ENTITY))]

    def metadata(self):
        return {"labels": json.dumps(self.predictor.labels)}

    def predict(self, rows, encodings=None):  # words need offsets: encoded again with them (reads_encodings off)
        values = [r[self.columns[0]] for r in rows]
        lists = [isinstance(v, (list, tuple)) for v in values]
        if any(lists) and not all(lists):
            raise ShrinkbertError(f"column '{self.columns[0]}' holds both texts and word lists: give one or the other")
        if lists and lists[0]:
            tagged = self.predictor.predict_words([list(v) for v in values], batch_size=max(1, len(rows)))
            words = [[{**w, "start": None, "end": None} for w in row] for row in tagged]
            entities = [None] * len(rows)
        else:
            results = self.predictor.predict(values, batch_size=max(1, len(rows)))
            words, entities = [r["words"] for r in results], [r["entities"] for r in results]
        return {"words": pa.array(words, pa.list_(WORD)), "entities": pa.array(entities, pa.list_(ENTITY))}


class Spans(Outputs):
    kind = "qa"

    @classmethod
    def columns_for(cls, text_column, text_pair_column, names):
        return [text_column or "question", text_pair_column or "context"]

    def fields(self):
        return [pa.field("answer", ANSWER)]

    def predict(self, rows, encodings=None):  # a context's windows: encoded again by answer()
        question, context = self.columns
        return {"answer": pa.array([self.predictor.answer(r[question], r[context]) for r in rows], ANSWER)}


OUTPUTS: dict[str, type[Outputs]] = {outputs.kind: outputs for outputs in (Embeddings, Labels, Tags, Spans)}


def outputs_for(predictor, text_column: str | None, text_pair_column: str | None, dtype: str = "float32",
                names: list[str] | None = None) -> Outputs:
    """The kind's Outputs, reading the columns the stages name (text, text_pair; question and context for QA;
    a tagger's word lists under "tokens") unless others are given. `names`: the first input's columns."""
    kind = kind_of(predictor)
    if kind not in OUTPUTS:
        raise ShrinkbertError(f"this bundle's kind '{kind}' has no corpus output")
    outputs = OUTPUTS[kind]
    if dtype not in DTYPES:
        raise ShrinkbertError(f"--dtype {dtype}: choose {' or '.join(DTYPES)}")
    if dtype not in outputs.dtypes:
        raise ShrinkbertError(f"--dtype {dtype} is for embedding bundles; this bundle is a {kind} model "
                              "(its scores are float64, as its Predictor returns them)")
    columns = outputs.columns_for(text_column, text_pair_column, names or [])
    return outputs(predictor, columns, dtype)


def _counting_tokenizer(predictor):
    """A copy of the bundle's tokenizer that truncates as it does but pads nothing (token counts), or None
    where the bundle pads nothing (a static embedding table's mean)."""
    graph = getattr(predictor, "graph", predictor)
    if graph is None or getattr(graph, "tokenizer", None) is None:
        return None
    from tokenizers import Tokenizer

    counter = Tokenizer.from_str(graph.tokenizer.to_str())
    counter.no_padding()
    return counter
