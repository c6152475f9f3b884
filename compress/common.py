"""Helpers every compress stage shares: loading a model, taking real rows, running both runtimes.

Rows are plain dicts {"text", "text_pair" (or None), "label" (or None)}, or for a token task
{"tokens": [words], "tags": [tag per word] (or None)}: the stages here only need inputs to feed and
labels to score, so nothing below depends on where the rows came from. A token classifier's
logits come back one row per word (its first sub-token, core/kinds/tagging.py) and its labels one per
word, so accuracy, parity and tolerances are computed the same way for both kinds.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from shrinkbert.core.data.dataspec import load_splits
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.families import base_prefixes, layer_group
from shrinkbert.core.kinds import kind_of, kind_of_rows, primary_metric
from shrinkbert.core.models import check_model_dir
from shrinkbert.core.ortsession import graph_feed
from shrinkbert.core.verify import verify_artifact

# Used for parity checks only when no task data is given (recorded as "builtin" in the manifest).
BUILTIN_SENTENCES = [
    "The film was a delight from start to finish.",
    "I would not recommend this product to anyone.",
    "Markets rallied after the central bank held rates steady.",
    "The match ended in a draw after extra time.",
    "A slow, tedious story with flat characters.",
    "The new phone has a brighter screen and a longer battery life.",
    "She said the plot was clever but the ending felt rushed.",
    "Parliament will vote on the bill next week.",
    "It is fine.",
    "What a waste of two hours!",
    "The service was quick and the staff were friendly, although the food arrived cold.",
    "Researchers released a smaller model that runs on a phone.",
    "ok",
    "The orchestra played beautifully, and the audience rose to its feet at the end of the night.",
    "Nothing about this was memorable.",
    "Shares of the company fell sharply in early trading.",
]


def load_rows(spec, split: str = "validation", max_rows: int | None = 256,
              cache_dir: str | None = None, kind=None) -> tuple[list[dict[str, Any]], Any]:
    """Rows of a task split (the data spec's stored splits), or the built-in sentences when spec is None
    (as rows of `kind`, the model's task kind: a token classifier's rows are words).

    Returns (rows, task); task is None for the built-in sentences (no labels).
    """
    if spec is None:
        rows = kind_of(kind).example_rows(BUILTIN_SENTENCES)
        return rows[:max_rows] if max_rows else rows, None

    task, dsd = load_splits(spec, cache_dir)
    data = spec.task
    splits = [split] if isinstance(split, str) else list(split)
    rows: list[dict[str, Any]] = []
    for name in splits:
        if name not in dsd:
            raise ShrinkbertError(f"task {data} has no '{name}' split (has: {', '.join(dsd)})")
        rows.extend(kind_of(task).rows(dsd[name], task))
    if max_rows:
        rows = rows[:max_rows]
    if not rows:
        raise ShrinkbertError(f"task {data} has no rows in split(s) {', '.join(splits)}")
    return rows, task


def align_labels(rows: list[dict[str, Any]], task, id2label: dict, tokenizer=None,
                 max_length: int = 128) -> list[int | None]:
    """Labels as the model's own ids, one per scored row (`torch_logits`/`ort_logits`): mapped
    through label names when task and model both name them. Token rows give one label per word
    that fits in max_length (a WordLabels; needs the tokenizer)."""
    return kind_of_rows(rows).gold_labels(rows, task, id2label, tokenizer, max_length)


def unit_scores(logits: np.ndarray, labels) -> np.ndarray | None:
    """One score in [0, 1] per scored unit, what accuracy averages and accuracy-aware quantization
    pairs: the labels' own where they carry it (a QA question's F1, core/kinds/qa.QALabels), else
    arg-max == label; None when there are no (or unlabelled) rows."""
    if labels is None or len(labels) == 0 or any(label is None for label in labels):
        return None
    own = getattr(labels, "unit_scores", None)
    if own is not None:
        return own(logits)
    return (np.asarray(logits).argmax(-1) == np.asarray(labels)).astype(np.float64)


def accuracy(logits: np.ndarray, labels) -> float | None:
    """Mean of `unit_scores`: the share of rows whose arg-max matches the label (a QA task: mean F1 / 100)."""
    scores = unit_scores(logits, labels)
    return None if scores is None else float(scores.mean())


def task_scores(task, logits: np.ndarray, labels) -> dict[str, float | None]:
    """The task's metrics from scored logits and align_labels' labels: accuracy, plus entity F1 for NER."""
    return kind_of(task).score(task, logits, labels)


def judged_scores(task, labels, **scored_rows: np.ndarray) -> dict[str, float | None]:
    """`val_{metric}_{name}` for each named set of scored rows, where the task is judged by a metric
    other than accuracy (entity F1, SQuAD F1, Spearman) that the stage records beside accuracy; {}
    where accuracy is the task's metric or no task is recorded."""
    judged_by = primary_metric(task)[0] if task is not None else "accuracy"
    if judged_by == "accuracy":
        return {}
    return {f"val_{judged_by}_{name}": task_scores(task, rows, labels)[judged_by] for name, rows in scored_rows.items()}


def encode(tokenizer, rows: Sequence[dict[str, Any]], max_length: int = 128, padding: Any = True,
           return_tensors: str = "np") -> dict[str, Any]:
    """Model inputs of rows (a BatchEncoding: for token rows its word_ids map sub-tokens to words)."""
    return kind_of_rows(rows).encode(tokenizer, rows, max_length, padding=padding, return_tensors=return_tensors)


def mean_tokens(tokenizer, rows: Sequence[dict[str, Any]], max_length: int = 128) -> int | None:
    """Mean tokens per model input (special tokens in, truncation at max_length; a QA row's windows each
    count) of rows as their kind encodes them; None with no rows."""
    if not len(rows):
        return None
    mask = np.asarray(encode(tokenizer, rows, max_length)["attention_mask"])
    return max(2, round(float(mask.sum(-1).mean())))


def load_pt(path: str | Path, eager: bool = False):
    """(model, tokenizer) of a PyTorch artifact, in eval mode, as its kind loads it (TaskKind.load_torch)."""
    return kind_of(check_model_dir(path)).load_torch(path, eager)


def torch_logits(model, tokenizer, rows, max_length: int = 128, batch_size: int = 32) -> np.ndarray:
    import torch

    from shrinkbert.core.predict import encoder_inputs

    out = []
    with torch.inference_mode():
        for i in range(0, len(rows), batch_size):
            batch = encode(tokenizer, rows[i:i + batch_size], max_length, return_tensors="pt")
            kind = kind_of_rows(rows)
            outputs = {k: v.float().numpy() for k, v in kind.outputs(model(**encoder_inputs(model, batch)), batch).items()}
            out.append(per_word(kind.output_array(outputs), batch, rows[i:i + batch_size]))
    return np.concatenate(out) if out else np.zeros((0, model.config.num_labels), np.float32)


def per_word(logits: np.ndarray, batch, rows) -> np.ndarray:
    """The rows' scored logits (their kind's): sequence logits as they are; a token classifier's
    (rows, seq, labels) as one row per word."""
    return kind_of_rows(rows).scored_logits(logits, batch, rows)


def onnx_file(path: str | Path) -> Path:
    """The one model.onnx of an ONNX artifact directory (or the file itself)."""
    path = Path(path)
    if path.is_file():
        verify_artifact(path.parent)
        return path
    if not path.is_dir():
        raise ShrinkbertError(f"ONNX artifact {path} does not exist")
    files = [path / "model.onnx"] if (path / "model.onnx").is_file() else sorted(path.glob("*.onnx"))
    if len(files) != 1:
        # the usual slip: a PyTorch artifact given where its ONNX export belongs
        hint = (f" (it holds PyTorch weights: `shrinkbert export --model {path}` makes the ONNX artifact)"
                if not files and (path / "model.safetensors").is_file() else "")
        raise ShrinkbertError(f"{path} holds {len(files)} .onnx files; expected one model.onnx{hint}")
    verify_artifact(path)
    return files[0]


def ort_session(path: str | Path, threads: int | None = None):
    """The session of an ONNX artifact directory (or file), under the kit's one thread policy."""
    from shrinkbert.core.ortsession import ort_session as open_session

    return open_session(onnx_file(path), threads)


def check_onnx_file(path: str | Path):
    """Load (and check) the ONNX graph, turning a corrupt file into one clear line."""
    import onnx

    file = onnx_file(path)
    try:
        model = onnx.load(str(file))
        onnx.checker.check_model(model)
    except Exception as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ShrinkbertError(f"{file} is not a valid ONNX model (corrupt or truncated?): {first[:300]}") from None
    return model


def ort_logits(session, tokenizer, rows, max_length: int = 128, batch_size: int = 32) -> np.ndarray:
    input_names = [i.name for i in session.get_inputs()]
    output_names = [o.name for o in session.get_outputs()]
    out = []
    for i in range(0, len(rows), batch_size):
        batch = encode(tokenizer, rows[i:i + batch_size], max_length)
        feed = graph_feed(batch, input_names)
        outputs = dict(zip(output_names, session.run(None, feed)))
        out.append(per_word(kind_of_rows(rows).output_array(outputs), batch, rows[i:i + batch_size]))
    return np.concatenate(out)


def parity(reference: np.ndarray, candidate: np.ndarray) -> dict[str, float]:
    diff = np.abs(reference - candidate)
    return {"max_abs_logit_diff": float(diff.max()) if diff.size else 0.0,
            "mean_abs_logit_diff": float(diff.mean()) if diff.size else 0.0,
            "label_agreement": float((reference.argmax(-1) == candidate.argmax(-1)).mean()) if diff.size else 1.0,
            "rows": int(reference.shape[0])}


def gzip_size(path: str | Path) -> int:
    """Bytes of the file after gzip level 6 (what a compressed download or zip would weigh), streamed."""
    import zlib

    z, size = zlib.compressobj(6), 0
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            size += len(z.compress(block))
    return size + len(z.flush())


def copy_graph_files(source: Path, out: Path, names: list[str]) -> None:
    """The files and folders a kind's ONNX folder carries from its PyTorch artifact (`graph_files`)."""
    for name in names:
        if (source / name).is_dir():
            shutil.copytree(source / name, out / name, dirs_exist_ok=True)
        elif (source / name).is_file():
            shutil.copy2(source / name, out / name)


def copy_tokenizer_files(src: str | Path, dst: str | Path) -> None:
    names = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
             "added_tokens.json")
    for name in names:
        if (Path(src) / name).is_file():
            shutil.copy2(Path(src) / name, Path(dst) / name)


def file_mb(path: str | Path) -> float:
    return round(Path(path).stat().st_size / 1e6, 3)


# Every family's base-model attribute, which wraps the encoder in a task model and in its traced
# graph's node names: "/mpnet/encoder/layer.0/...".
BASE_PREFIXES = base_prefixes()
# The group names that need no family: the parts of a model outside its layers.
_OUTSIDE_LAYERS = ("embeddings", "pooler", "classifier")


def module_group(path: str) -> str:
    """Map a dotted or slashed path inside the model to the user-facing module group name.

    Groups: embeddings, encoder.layer.N.attention, encoder.layer.N.intermediate,
    encoder.layer.N.output, pooler, classifier; '' when the path names none of them. Each family maps
    its own layers to these names (`Family.layer_group`, core/families).
    """
    parts = [p for p in path.replace("/", ".").split(".") if p]
    while parts and parts[0] in BASE_PREFIXES:  # a traced graph's wrappers too
        parts = parts[1:]
    if not parts:
        return ""
    group = layer_group(parts)
    if group is not None:
        return group
    return parts[0] if parts[0] in _OUTSIDE_LAYERS else ""
