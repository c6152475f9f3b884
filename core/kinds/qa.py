"""Extractive question answering (SQuAD style): an answer is a span of the context.

Rows are the hub `squad` dataset's: {"id", "title", "context", "question", "answers": {"text",
"answer_start"}} (core/qa_data.py reads, checks and splits them by article). A question becomes
one or more overlapping windows (core/kinds/qa_windows.py: question first, only the context
truncated); the model is a ForQuestionAnswering with start and end logits per token; training
targets are each window's start/end_positions (the answer, or [CLS] where the window does not hold
it). KD compares the softened start and the softened end distributions of every window. An
answer is the best valid span over all windows of its question (core/kinds/edge/qa_edge.py, the
one home of postprocessing, shared with the bundle); the metric is SQuAD exact match and F1
(core/metrics/squad), with the HasAns/NoAns breakdown and the validation-chosen null threshold for
SQuAD v2.0 (task metric "squad_v2").

Window size: the stage's max_length (384 in transformers' run_qa); neighbouring windows share
doc_stride = max_length / 3 tokens (run_qa's 128 at 384).
"""
from __future__ import annotations

from typing import Any, Sequence

import datasets
import numpy as np

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds import register
from shrinkbert.core.kinds.base import TaskKind
from shrinkbert.core.kinds.edge.qa_edge import answer_question, best_null_threshold
from shrinkbert.core.kinds.losses import kd_logits_loss
from shrinkbert.core.kinds.qa_windows import DOC_STRIDE, MAX_LENGTH, context_offsets, encode_batch, tokenize_windows
from shrinkbert.core.metrics.squad.compute_score import compute_score, question_scores
from shrinkbert.core.predict import model_inputs
from shrinkbert.core.qa_data import (FEATURES, carve_missing, check_unique_across, looks_like_qa, read_qa_file,
                                     read_qa_table)
from shrinkbert.core.userdata import quiet_datasets

LABEL_NAMES = ("start", "end")  # ForQuestionAnswering's two outputs per token (num_labels 2)
MODEL_COLUMNS = ("input_ids", "attention_mask", "token_type_ids")
TARGET_COLUMNS = ("start_positions", "end_positions")
EVAL_COLUMNS = ("example_id", "offset_mapping", "context", "gold_answers")
MASKED = -1e4  # a padded position's logit: no probability in the softened distributions


def default_doc_stride(max_length: int) -> int:
    """Tokens neighbouring windows share: run_qa's 128 at 384, in proportion for other lengths."""
    return max(1, DOC_STRIDE * max_length // MAX_LENGTH)


def is_v2(task) -> bool:
    return task is not None and "squad_v2" in task.metrics


class QALabels(list):
    """Gold answers of QA rows (one list of texts per question), with what scoring flat
    `scored_logits` rows needs: each window's question index, real-token count and context
    offsets, and each question's context (the windows of `encode` at the same max_length)."""

    def __init__(self, answers, owners, lengths, offsets, contexts, version_2: bool):
        super().__init__(answers)
        self.owners, self.lengths, self.offsets, self.contexts = owners, lengths, offsets, contexts
        self.version_2 = version_2

    def answers(self, scored: np.ndarray, null_threshold: float = 0.0) -> list[dict]:
        """One answer dict (qa_edge.answer_question) per question from flat (start, end) rows."""
        scored = np.asarray(scored)
        if len(scored) != sum(self.lengths):
            raise ShrinkbertError(f"{len(scored)} scored QA rows for windows of {sum(self.lengths)} tokens: "
                                  "score with the max_length the rows were encoded with")
        bounds = np.concatenate([[0], np.cumsum(self.lengths)])
        parts: list[list[tuple]] = [[] for _ in self]
        for window, owner in enumerate(self.owners):
            rows = scored[bounds[window]:bounds[window + 1]]
            parts[owner].append((rows[:, 0], rows[:, 1], self.offsets[window]))
        return [answer_question(part, context, version_2_with_negative=self.version_2, null_threshold=null_threshold)
                for part, context in zip(parts, self.contexts)]

    def null_threshold(self, scored: np.ndarray) -> float:
        """SQuAD v2: the no-answer threshold that maximises F1 on these (validation) rows."""
        spans = self.answers(scored, null_threshold=float("inf"))
        found = self.answers(scored)
        return best_null_threshold([a["null_score_diff"] for a in found],
                                   [question_scores(s["text"], gold)[1] for s, gold in zip(spans, self)],
                                   [any(g.strip() for g in gold) for gold in self])

    def unit_scores(self, scored: np.ndarray) -> np.ndarray:
        """Each question's F1 in [0, 1] (the unit accuracy-style checks average and pair)."""
        return np.asarray([question_scores(found["text"], gold)[1]
                           for found, gold in zip(self.answers(scored), self)], dtype=np.float64)


@register
class QAKind(TaskKind):
    name = "qa"
    architecture_suffix = "ForQuestionAnswering"
    auto_model_class = "AutoModelForQuestionAnswering"
    ort_model_class = "ORTModelForQuestionAnswering"
    export_task = "question-answering"
    columns = ("id", "title", "context", "question", "answers")
    output_names = ("start_logits", "end_logits")
    per_token_outputs = True
    default_max_length = MAX_LENGTH  # run_qa's 384-token windows
    windowed = True
    open_vocabulary = True  # a deployed QA model reads documents no split held
    target_columns = TARGET_COLUMNS
    scoring_columns = EVAL_COLUMNS
    known_metrics = ("squad", "squad_v2")
    read_priority = 5  # before the catch-all table of texts: SQuAD files have no text/label columns
    description = "extractive question answering"
    scored_unit = "questions"
    cache_identity = ("qa-windows",)
    bundle_module = "qa_edge.py"

    # -- the task declaration ---------------------------------------------------------------------
    def check_task(self, task) -> None:
        if task.pair:
            raise ShrinkbertError(f"task '{task.name}': a QA task reads question and context, not a text pair")
        if tuple(task.label_names) != LABEL_NAMES:
            raise ShrinkbertError(f"task '{task.name}': a QA task's outputs are {list(LABEL_NAMES)}, "
                                  f"got {list(task.label_names)}")
        super().check_task(task)

    def default_metrics(self, label_names) -> tuple[str, ...]:
        return ("squad",)

    def primary_metric(self, task) -> tuple[str, str]:
        return "f1", "F1"

    def metric_columns(self, task) -> list[tuple[str, str, str]]:
        columns = [("exact_match", "exact_match", "EM"), ("f1", "f1", "F1")]
        if is_v2(task):
            columns += [("HasAns_f1", "HasAns_f1", "HasAns F1"), ("NoAns_f1", "NoAns_f1", "NoAns F1")]
        return columns

    def metrics_note(self, report, columns, max_length: int) -> str | None:
        return (f"- Metrics: SQuAD exact match and F1 (official answer normalisation, best over the gold "
                f"answers) per question over all its windows of {max_length} tokens, the best valid span "
                "(n_best 20, at most 30 tokens) cut from the context; through `evaluate` (core/metrics/squad).")

    # -- reading and checking rows ----------------------------------------------------------------
    def read_user_splits(self, read, where, options):
        if not read or not all(not conll and looks_like_qa(table) for table, _, conll in read.values()):
            return None
        metrics = tuple(options.get("metrics") or ())
        version_2 = True if "squad_v2" in metrics else None  # else as a SQuAD JSON file declares (flat: v1.1)
        splits = {}
        for split, (table, file, _) in read.items():
            if set(table.column_names) == {"version", "data"} or not file.startswith("hub dataset"):
                splits[split] = read_qa_file(file, version_2)
            else:
                splits[split] = read_qa_table(table, file, bool(version_2))
        check_unique_across(splits, where)
        unanswerable = any(not answers["text"] for table in splits.values() for answers in table["answers"])
        metrics = metrics or (("squad_v2",) if unanswerable else ("squad",))
        # Carved by article here (make_splits would carve by row and leak paragraphs into test).
        return {"label_names": LABEL_NAMES, "metrics": metrics}, dict(
            carve_missing(splits, where, int(options.get("split_seed", 0) or 0)))

    def label_features(self, features, task):
        return FEATURES.copy()

    def rows(self, split, task) -> list[dict[str, Any]]:
        return split.to_list()

    def example_rows(self, sentences: Sequence[str]) -> list[dict[str, Any]]:
        return [{"id": str(i), "title": "", "context": text, "question": " ".join(text.split()[:4]) + "?",
                 "answers": None} for i, text in enumerate(sentences)]

    def test_rows(self, split, task) -> dict[str, Any]:
        return {"texts": list(split["question"]), "pairs": list(split["context"]),
                "labels": [list(answers["text"]) for answers in split["answers"]]}

    def texts(self, split) -> list:
        return list(zip(split["question"], split["context"]))

    # -- encoding and collating -------------------------------------------------------------------
    def tokenize(self, dataset, tokenizer, task, max_length: int = MAX_LENGTH, label_all_subtokens: bool = False,
                 doc_stride: int = 0):
        """Windows of every question (neighbours sharing doc_stride tokens; 0: `default_doc_stride(max_length)`).
        Train: model inputs and start/end_positions. Validation and test (and a lone Dataset): also
        each window's question id, context offsets, context and gold answers, which scoring needs
        (`score_split` collates the model inputs only)."""
        def one(split, name):
            missing = [c for c in ("id", "context", "question", "answers") if c not in split.column_names]
            if missing:
                raise ShrinkbertError(f"a QA task's rows need {', '.join(missing)}")
            stride = doc_stride or default_doc_stride(max_length)

            def encode(batch):
                windows = encode_batch(batch, tokenizer, max_length, stride)
                if name == "train":
                    for column in ("example_id", "offset_mapping"):
                        windows.pop(column)
                else:
                    owner = {qid: i for i, qid in enumerate(batch["id"])}
                    windows["context"] = [batch["context"][owner[q]] for q in windows["example_id"]]
                    windows["gold_answers"] = [list(batch["answers"][owner[q]]["text"]) for q in windows["example_id"]]
                return windows

            with quiet_datasets():
                return split.map(encode, batched=True, remove_columns=split.column_names)

        if isinstance(dataset, datasets.Dataset):
            return one(dataset, "test")
        return datasets.DatasetDict({name: one(split, name) for name, split in dataset.items()})

    def encode(self, tokenizer, rows, max_length: int = MAX_LENGTH, padding: Any = True,
               return_tensors: str | None = "np"):
        """Padded windows of rows: model inputs only (a model's forward takes the encoding as it is)."""
        encoded = tokenize_windows(tokenizer, [r["question"] for r in rows], [r["context"] for r in rows], max_length,
                                   default_doc_stride(max_length), padding=padding, return_tensors=return_tensors)
        for extra in ("offset_mapping", "overflow_to_sample_mapping"):
            encoded.pop(extra, None)
        return encoded

    # -- models and outputs -----------------------------------------------------------------------
    @staticmethod
    def _masked(logits, attention_mask):
        return logits.float().masked_fill(attention_mask == 0, MASKED)

    def pack_outputs(self, outputs):
        """Start and end logits stacked per token ([B, L, 2]): the cache packs each window's real tokens."""
        import torch  # deferred: torch takes seconds to import

        return torch.stack([outputs["start_logits"], outputs["end_logits"]], dim=-1)

    def unpack_outputs(self, packed):
        return {"start_logits": packed[..., 0], "end_logits": packed[..., 1]}

    def kd_loss(self, student, teacher, batch, temperature):
        """KL of the softened start distribution plus that of the end distribution, each over a
        window's real tokens, T^2-scaled, averaged over the two (as the hard loss averages them)."""
        mask = batch["attention_mask"]
        return sum(kd_logits_loss(self._masked(student[name], mask), self._masked(teacher[name], mask), temperature)
                   for name in self.output_names) / 2

    def hard_loss(self, student, batch):
        """Cross-entropy of the start and of the end positions, averaged (BertForQuestionAnswering's loss)."""
        import torch.nn.functional as F  # deferred: torch takes seconds to import

        mask = batch["attention_mask"]
        return sum(F.cross_entropy(self._masked(student[name], mask), batch[target])
                   for name, target in zip(self.output_names, TARGET_COLUMNS)) / 2

    def train_step_loss(self, model_output, batch):
        """The model's own loss on start/end_positions (run_qa's), and how often both ends are hit."""
        hits = ((model_output.start_logits.argmax(-1) == batch["start_positions"])
                & (model_output.end_logits.argmax(-1) == batch["end_positions"]))
        return model_output.loss, {"span_accuracy": hits.float().mean()}

    def importance_loss(self, model_output, batch, labels):
        """Cross-entropy of the start and end logits against the model's own best start and end per
        window (a window's gold positions are not in the encoded rows; pruning ranks by sensitivity)."""
        import torch.nn.functional as F  # deferred: torch takes seconds to import

        mask = batch["attention_mask"]
        return sum(F.cross_entropy(logits, logits.detach().argmax(-1))
                   for logits in (self._masked(getattr(model_output, name), mask) for name in self.output_names)) / 2

    def scored_logits(self, logits, batch, rows=None) -> np.ndarray:
        """Start/end logits ([windows, L, 2], or a (start, end) pair of [windows, L]) -> one row
        (start, end) per real token of every window: the flat rows parity checks compare."""
        if isinstance(logits, (tuple, list)):
            logits = np.stack([np.asarray(logits[0]), np.asarray(logits[1])], axis=-1)
        logits = np.asarray(logits)
        if logits.ndim != 3 or logits.shape[-1] != 2:
            raise ShrinkbertError(f"the model returned logits of shape {logits.shape}: a QA task needs a "
                                  "question-answering model (start and end logits per token)")
        mask = np.asarray(batch["attention_mask"]).astype(bool)
        return logits[mask]

    def gold_labels(self, rows, task, id2label, tokenizer=None, max_length: int = MAX_LENGTH) -> list:
        """A QALabels: the gold texts per question (None for unlabelled rows) and the windows that
        `encode` makes of the rows at max_length (needs the tokenizer)."""
        answers = [list(r["answers"]["text"]) if r.get("answers") is not None else None for r in rows]
        if tokenizer is None or not rows:
            return answers
        encoded = tokenize_windows(tokenizer, [r["question"] for r in rows], [r["context"] for r in rows],
                                   max_length, default_doc_stride(max_length))
        windows = range(len(encoded["input_ids"]))
        return QALabels(answers, list(encoded["overflow_to_sample_mapping"]),
                        [int(sum(encoded["attention_mask"][w])) for w in windows],
                        [context_offsets(encoded, w) for w in windows], [r["context"] for r in rows], is_v2(task))

    def bundle_validation_meta(self, task, scored, labels):
        """SQuAD v2 bundles answer "" past the null threshold chosen on the validation rows given."""
        if not is_v2(task):
            return {"version_2_with_negative": False}
        labelled = isinstance(labels, QALabels) and scored is not None and all(g is not None for g in labels)
        return {"version_2_with_negative": True, "null_threshold": labels.null_threshold(scored) if labelled else 0.0}

    def bundle_agreement(self, predictor, rows, task, tokenizer, max_length, source_scored, meta):
        """Each question's answer from the bundle's `answer()` against the source model's over the same
        windows, run as one batch per question as the bundle runs them (dynamic int8 scales depend on
        the batch): text and character span must be identical."""
        same = 0
        for row in rows:
            labels = self.gold_labels([row], task, None, tokenizer, max_length)
            expected = labels.answers(source_scored([row]), float(meta.get("null_threshold", 0.0)))[0]
            got = predictor.answer(row["question"], row["context"])
            same += (got["text"], got["start"], got["end"]) == (expected["text"], expected["start"], expected["end"])
        return {"same": same, "of": len(rows)}

    def output_array(self, outputs) -> np.ndarray:
        """Start and end logits side by side ([windows, L, 2]), as `scored_logits` reads them."""
        return np.stack([np.asarray(outputs["start_logits"]), np.asarray(outputs["end_logits"])], axis=-1)

    # -- metrics ----------------------------------------------------------------------------------
    def score(self, task, scored, labels) -> dict[str, float | None]:
        """SQuAD scores of flat `scored_logits` rows against `gold_labels`' QALabels (their windows)."""
        if not isinstance(labels, QALabels) or any(gold is None for gold in labels):
            return {"exact_match": None, "f1": None}
        found = labels.answers(scored)
        return self.score_answers(task, {str(i): a["text"] for i, a in enumerate(found)},
                                  {str(i): list(gold) for i, gold in enumerate(labels)})

    def score_answers(self, task, predictions: dict[str, str], references: dict[str, list[str]]) -> dict[str, float]:
        """SQuAD scores of {id: answer text} against {id: gold texts} (core/metrics/squad's rules)."""
        return compute_score(predictions, references)

    def answers(self, windows: datasets.Dataset, start_logits: np.ndarray, end_logits: np.ndarray, task,
                null_threshold: float = 0.0) -> tuple[dict[str, dict], dict[str, list[str]]]:
        """({id: answer dict of qa_edge.answer_question}, {id: gold texts}) of windows and their logits."""
        grouped: dict[str, list[int]] = {}
        for index, qid in enumerate(windows["example_id"]):
            grouped.setdefault(qid, []).append(index)
        offsets, contexts, golds = windows["offset_mapping"], windows["context"], windows["gold_answers"]
        lengths = [len(ids) for ids in windows["input_ids"]]  # a window's own tokens: padding is never a candidate
        predicted, references = {}, {}
        for qid, indices in grouped.items():
            parts = [(start_logits[i][:lengths[i]], end_logits[i][:lengths[i]], offsets[i]) for i in indices]
            predicted[qid] = answer_question(parts, contexts[indices[0]], version_2_with_negative=is_v2(task),
                                             null_threshold=null_threshold)
            references[qid] = list(golds[indices[0]])
        return predicted, references

    def score_windows(self, windows, start_logits, end_logits, task) -> dict[str, float]:
        """SQuAD scores of a split's windows; for v2 also the null threshold that maximises F1
        (best_f1, best_f1_thresh, as the official v2.0 script reports them)."""
        predicted, references = self.answers(windows, start_logits, end_logits, task)
        scores = self.score_answers(task, {q: a["text"] for q, a in predicted.items()}, references)
        if is_v2(task):
            ids = list(references)
            # Each question's F1 if its best span were given (the null threshold set to +inf).
            spans = self.answers(windows, start_logits, end_logits, task, null_threshold=float("inf"))[0]
            answer_f1 = [question_scores(spans[q]["text"], references[q])[1] for q in ids]
            has_answer = [any(g.strip() for g in references[q]) for q in ids]
            threshold = best_null_threshold([predicted[q]["null_score_diff"] for q in ids], answer_f1, has_answer)
            best = self.answers(windows, start_logits, end_logits, task, null_threshold=threshold)[0]
            scores.update(best_f1=self.score_answers(task, {q: a["text"] for q, a in best.items()}, references)["f1"],
                          best_f1_thresh=threshold)
        return scores

    def window_logits(self, model, windows, batch_size: int = 64) -> tuple[np.ndarray, np.ndarray, float]:
        """(start logits, end logits, mean loss) of a PyTorch model over tokenized windows, padded to
        the longest window (positions past a window's end are never a valid span)."""
        import torch  # deferred: torch takes seconds to import

        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        width = max(len(ids) for ids in windows["input_ids"])
        starts, ends, losses = [], [], []
        with torch.no_grad():
            for first in range(0, len(windows), batch_size):
                part = windows.select(range(first, min(first + batch_size, len(windows))))
                batch = {c: torch.tensor([list(v) + [0] * (width - len(v)) for v in part[c]], device=device)
                         for c in MODEL_COLUMNS if c in part.column_names}
                batch.update({c: torch.tensor(part[c], device=device) for c in TARGET_COLUMNS if c in part.column_names})
                out = model(**model_inputs(model, batch))
                starts.append(out.start_logits.float().cpu().numpy())
                ends.append(out.end_logits.float().cpu().numpy())
                if out.loss is not None:
                    losses.append(float(out.loss) * len(part))
        model.train(was_training)
        loss = sum(losses) / len(windows) if losses else float("nan")
        return np.concatenate(starts), np.concatenate(ends), loss

    def score_split(self, model, dataset, collate, task, batch_size: int = 64) -> dict[str, float]:
        if "example_id" not in dataset.column_names:
            raise ShrinkbertError("QA scoring needs the windows of a validation or test split (example_id, offsets)")
        starts, ends, loss = self.window_logits(model, dataset, batch_size)
        scores = self.score_windows(dataset, starts, ends, task)
        scores["loss"] = loss
        return scores

    def score_runner(self, runner, rows, columns, batch_size: int, max_length: int) -> dict[str, Any]:
        """Every question over all its windows of max_length tokens, each question's windows as one
        batch (as the bundle answers, and as a deployed model meets a question: dynamic int8 scales
        depend on the batch, so an ONNX int8 variant then answers exactly as its bundle): a bundle
        answers with its own Predictor.answer; a PyTorch or ONNX variant runs the kit's windows and
        the shared postprocessing (qa_edge). `batch_size` is not used. SQuAD EM/F1 (v2: HasAns/NoAns,
        null threshold 0 for every variant alike); "correct" is each question's exact match (the
        report's paired differences)."""
        table = [{"question": q, "context": c, "answers": {"text": list(g)}}
                 for q, c, g in zip(rows.texts, rows.pairs, rows.labels)]
        found = runner.own_answers(rows.texts, rows.pairs)
        windows = None
        if found is None:
            labels = self.gold_labels(table, rows.task, None, runner.tokenizer, max_length)
            parts = []
            for row in table:
                encoded = self.encode(runner.tokenizer, [row], max_length)
                outputs = runner.forward_outputs(runner.prepare(dict(encoded)))
                parts.append(self.scored_logits(self.output_array(outputs), encoded))
            found = labels.answers(np.concatenate(parts))
            windows = len(labels.owners)
        texts = [a["text"] or "" for a in found]
        metrics = self.score_answers(rows.task, {str(i): t for i, t in enumerate(texts)},
                                     {str(i): list(g) for i, g in enumerate(rows.labels)})
        return {"metrics": metrics, "n": len(rows), "predictions": texts, "windows": windows,
                "correct": [int(question_scores(t, g)[0]) for t, g in zip(texts, rows.labels)],
                "correct_metric": "exact match"}
