"""What every stage needs to know about what a model predicts: the TaskKind interface.

A task kind (sequence classification, token classification, extractive QA, sentence embeddings)
is one module in this package holding one TaskKind subclass, registered with `@register`. Stages
never ask "which kind is this?": they get the kind from the registry (`kind_of(task or manifest
or model)`) and call its methods. A new kind is one new module here and its tests.

The shapes passed between the stages and a kind:

  row        a plain dict as the data contract stores it, in the Hugging Face dataset's own shape:
             sequence {"text", "text_pair" (or None), "label" (or None)}; token {"tokens",
             "tags" (or None)}; a kind declares its `columns` and reads/writes rows in that shape.
  tokenized  a `datasets.Dataset` of model inputs (input_ids, attention_mask, token_type_ids,
             unpadded) plus whatever the kind needs to score or distil ("labels", ...).
  batch      the collated tensors of tokenized rows (`collate`), padded, plus "row_idx".
  outputs    {name: tensor} for the names in `output_names`: what the teacher-output cache
             stores and what the KD loss compares (sequence/token: "logits").
  scored     numpy rows the kit compares between runtimes and scores: one row per example
             (sequence), per scored word (token), ... (`scored_logits`). Parity checks, the int8
             tolerance and `score` all work on these flat arrays, so one code path serves all kinds.

Heavy libraries (transformers, optimum) are imported inside the methods that need them, to keep
`import shrinkbert` light; everything here is plain Python.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.parity_texts import parity_texts


class TaskKind(ABC):
    """One kind of prediction. Subclasses set the class attributes and implement the methods.

    Instances are stateless singletons (the registry holds one per kind); pass the Task where a
    method needs the task's labels or metrics.
    """

    # -- identity ---------------------------------------------------------------------------------
    name: ClassVar[str]
    """The kind's name as stored in Task.kind, in shrinkbert.json and in a bundle's labels.json."""

    architecture_suffix: ClassVar[str]
    """How a saved model's config.architectures reveal the kind, e.g. "ForTokenClassification"
    (`matches_architectures` tests it; `kind_of(model)` relies on it)."""

    auto_model_class: ClassVar[str]
    """The transformers Auto class that loads this kind's artifacts as they are, by name,
    e.g. "AutoModelForSequenceClassification" (see `model_class`)."""

    ort_model_class: ClassVar[str]
    """The Optimum ONNX Runtime class that loads this kind's ONNX artifact, e.g.
    "ORTModelForSequenceClassification" (see `ort_class`)."""

    export_task: ClassVar[str]
    """The Optimum export task (`optimum.exporters.onnx.main_export(task=...)`), e.g.
    "text-classification", "token-classification", "question-answering", "feature-extraction"."""

    columns: ClassVar[tuple[str, ...]]
    """The stored splits' columns (the data contract), e.g. ("text", "text_pair", "label")."""

    output_names: ClassVar[tuple[str, ...]] = ("logits",)
    """The model outputs the teacher-output cache stores and the KD loss at the outputs compares."""

    per_token_outputs: ClassVar[bool] = False
    """True when `output_names` are per token ([B, L, ...]): the cache then packs each row's real
    tokens end to end; False: one vector per row ([B, ...])."""

    cacheable_outputs: ClassVar[bool] = True
    """Whether the teacher-output cache (students/cache.py) can hold this kind's outputs. It holds
    one tensor per row, `pack_outputs` of the outputs: per row ([B, C]), or per real token when it is
    [B, L, C] (packed end to end); `unpack_outputs` gives the outputs back. A kind whose outputs fit
    no such tensor sets False, and distillation runs its teacher live."""

    target_columns: ClassVar[tuple[str, ...]] = ("labels",)
    """The tokenized training columns a batch carries besides the model inputs (the gold targets
    `hard_loss` and `train_step_loss` read); collated as tensors."""

    scoring_columns: ClassVar[tuple[str, ...]] = ()
    """Tokenized test columns `score_split` reads besides model inputs and targets (kept on the rows
    a stage scores, e.g. a QA window's question id and offsets)."""

    open_vocabulary: ClassVar[bool] = False
    """True when the model meets text at use time that no split holds (QA: new documents): trim-vocab
    then keeps the train/validation tokens only and measures the trimmed vocabulary on the test
    texts as unseen text (compress/trim_vocab.py), refusing where it would hurt."""

    windowed: ClassVar[bool] = False
    """True when a long input becomes overlapping windows of max_length tokens (QA): the training
    stages then take a doc_stride (`tokenize(..., doc_stride=N)`)."""

    default_max_length: ClassVar[int] = 128
    """Tokens per example where a stage's max_length is left empty (QA: run_qa's 384 per window)."""

    supports_pairs: ClassVar[bool] = False
    """Whether a task of this kind may read two texts per row (Task.pair)."""

    supports_transfer_set: ClassVar[bool] = False
    """Whether unlabelled sentence-level transfer rows (distill --augment, --transfer-corpus) fit."""

    # -- identity helpers (shared) ----------------------------------------------------------------
    def claims_unmarked(self, path, stage: str) -> bool:
        """Whether `stage` treats the folder `path` that no manifest marks, a model as it ships, as
        this kind's (`kind_for_stage`); `kind_of` still reads such a folder by its architectures everywhere else."""
        return False

    def max_length(self, requested: int | None) -> int:
        """A stage's max_length: the one asked for, else this kind's `default_max_length`."""
        return int(requested) if requested else self.default_max_length

    def matches_architectures(self, architectures: Sequence[str] | None) -> bool:
        """True when a model config's `architectures` name a model of this kind."""
        return any(str(a).endswith(self.architecture_suffix) for a in (architectures or []))

    def model_class(self):
        """The transformers Auto class of this kind: `from_pretrained` loads an artifact of any encoder
        family, `from_config` builds a new student of the config's family (core/families)."""
        import transformers  # deferred: transformers takes seconds to import

        from shrinkbert.core.compact import register

        register()  # the compact students' configs (core/compact) load through the Auto classes too
        return getattr(transformers, self.auto_model_class)

    def ort_class(self):
        """The optimum.onnxruntime ORTModelFor… class of this kind."""
        import optimum.onnxruntime  # deferred: optimum imports torch and transformers

        from shrinkbert.core.compact import register

        register()
        return getattr(optimum.onnxruntime, self.ort_model_class)

    gives: ClassVar[str] = "logits"
    """What this kind's models give, as the bundle and eval stages ask it: "logits" (scores per class,
    per word's tag, per answer start and end: held to their source by logit parity and label agreement,
    measured by the task's metric, latency and memory) or "sentence vectors" (one unit vector per text:
    held to their source by the vectors' difference, measured by cosines, agreement with the baseline
    and retrieval). Each of those stages keeps one set of parts per answer (compress/bundle.py,
    eval/harness.py)."""

    sentence_vectors: ClassVar[bool] = False
    """True when this kind's models give one vector per sentence (sentence embeddings): `finetune
    --mode embeddings` takes such a kind's tasks as they are, and trains an embedding model on the
    entailment pairs of a pair task of another kind (NLI)."""

    objective: ClassVar[str] = "logits"
    """How `distill` teaches a student of this kind unless --objective says otherwise (one of
    students/objectives/: "logits" for a model that gives logits, "vectors" for one that gives
    sentence vectors)."""

    graph_export: ClassVar[str] = "optimum"
    """How the export stage writes this kind's ONNX graph: "optimum" (Optimum's `main_export` under
    `export_task`, the layout the ORTModelFor… class loads) or "traced" (the module `load_torch`
    gives, traced by torch.onnx with `output_names` as its outputs: for a kind whose outputs are
    computed after the encoder, like a sentence embedder's pooling and normalisation, which
    Optimum's feature-extraction export leaves out)."""

    def load_torch(self, path, eager: bool = False):
        """(model, tokenizer) of a PyTorch artifact of this kind, the model in eval mode: what the
        stages run, compare and export. Its forward takes the encoder inputs and returns what
        `outputs` reads. The default: the kind's Auto class (`model_class`)."""
        from shrinkbert.core.models import load_model, load_tokenizer

        model = load_model(self.model_class(), path, **({"attn_implementation": "eager"} if eager else {})).eval()
        return model, load_tokenizer(path, model.config)

    def model_for_task(self, path, task):
        """The model `finetune` trains on a task of this kind, from the artifact at `path`: by default the
        kind's Auto class with a head sized for the task's labels (a new head from the current seed)."""
        from shrinkbert.core.models import load_model
        from shrinkbert.core.quiet import new_head_reported

        with new_head_reported("finetune"):  # the head is what finetune trains: named in one line
            return load_model(self.model_class(), path, num_labels=task.num_labels, id2label=task.id2label,
                              label2id=task.label2id, ignore_mismatched_sizes=True)

    def graph_files(self, source) -> list[str]:
        """Files and folders of the PyTorch artifact `source` that its ONNX folder carries besides the
        tokenizer (a traced graph: config.json; Optimum writes its own)."""
        return ["config.json"] if self.graph_export == "traced" else []

    stages_not_built: ClassVar[dict[str, str]] = {}
    """Stages this kind's models do not go through, {stage: why}: the stage refuses them in one
    line naming the reason (`kinds.require_stage`) and writes nothing."""

    # -- the task declaration ---------------------------------------------------------------------
    known_metrics: ClassVar[tuple[str, ...]] = ("accuracy",)
    """Metric names a task of this kind may declare (Task.metrics)."""

    description: ClassVar[str] = ""
    """A few words for report titles ("token classification"); "" for the plain default."""

    def check_task(self, task) -> None:
        """Raise ShrinkbertError (one line naming the task) when a Task declaration does not fit this
        kind. A metric that another kind owns is refused by the registry (`kinds.check_task`) before
        this is called; the default accepts the rest. Extend it (call super())."""

    def default_metrics(self, label_names: Sequence[str]) -> tuple[str, ...]:
        """The metrics a task of this kind reports when the user names none."""
        return ("accuracy",)

    @abstractmethod
    def primary_metric(self, task) -> tuple[str, str]:
        """(key in `score`'s dict, name for tables) of the number a task is judged by, e.g.
        ("accuracy", "accuracy") or ("entity_f1", "entity F1"). Stages judge by it (retention, the
        best epoch)."""

    def report_metric(self, task) -> tuple[str, str]:
        """(key, name) of the eval report's headline metric (default: `primary_metric`)."""
        return self.primary_metric(task)

    def metric_columns(self, task) -> list[tuple[str, str, str]]:
        """(column, key in the scores, name for tables) per metric the eval report shows."""
        return [(m, m, m) for m in task.metrics]

    def metrics_note(self, report: dict[str, Any], columns, max_length: int) -> str | None:
        """The eval report's line on how the metrics were computed (Markdown, "- Metrics: ...");
        None: the report's default line for one label per row."""
        return None

    def adopt(self, task, splits: dict) -> tuple[Any, dict]:
        """(task, splits) read as this kind's, for a stage told to train this kind's model on them
        (`finetune --mode`); by default only this kind's own tasks, as they are. A kind that can learn
        from another kind's rows (sentence embeddings from an NLI task's pairs) converts them here."""
        if task.kind != self.name:
            raise ShrinkbertError(f"task '{task.name}' is a {task.kind} task: a {self.name} model is not trained on it")
        return task, splits

    def passes_on(self, task) -> bool:
        """Whether the models trained on `task` carry it as their data record, the task later stages
        score them on (an NLI task a sentence-embedding model learned from does not: later stages of
        an embedding model score it on scored pairs)."""
        return True

    # -- reading and checking rows ----------------------------------------------------------------
    read_priority: ClassVar[int] = 50
    """Order in which kinds are offered a user's data source (`read_user_splits`): lower first;
    the catch-all (sequence: any table of texts and labels) goes last."""

    def read_user_splits(self, read: dict, where: str, options: dict) -> tuple[dict, dict] | None:
        """A user's file(s) or a hub dataset, if they hold this kind's data: (task fields, splits),
        else None (the next kind is asked). `read` is {split: (datasets.Dataset as read, the file
        it came from, whether it was read as CoNLL)}; `options` the load_task options
        (text_column, text_pair_column, label_column, label_names, metrics). The task fields are
        {"label_names": (...), "metrics": (...), "pair": bool (optional)}; the splits {split:
        Dataset} in this kind's `columns` with labels as ClassLabel indices. Raise ShrinkbertError
        for data that is this kind's but malformed."""
        return None

    @abstractmethod
    def label_features(self, features, task):
        """The stored splits' `datasets.Features` with this kind's label column(s) cast to the task's
        ClassLabel(s) (e.g. "label" -> ClassLabel(task.label_names)); returns the new Features."""

    @abstractmethod
    def rows(self, split, task) -> list[dict[str, Any]]:
        """The rows (plain dicts in this kind's shape) of one stored `datasets.Dataset` split."""

    def long_parity_rows(self, max_length: int, task) -> list[dict[str, Any]]:
        """Unlabelled rows at and past `max_length` tokens that a bundle's parity check adds to its
        task rows: a bundle that truncates or pads differently from its model differs only there
        Default: a text of exactly max_length tokens and one about 2.5 times as long (a token row
        whose last words fall outside the window; a QA context that needs several windows)."""
        return self.example_rows(parity_texts(max_length)[-2:])

    @abstractmethod
    def example_rows(self, sentences: Sequence[str]) -> list[dict[str, Any]]:
        """Unlabelled rows made from plain sentences: used for parity checks when no task data is
        given (compress stages without --task)."""

    @abstractmethod
    def test_rows(self, split, task) -> dict[str, Any]:
        """The fields of eval's TestRows for one stored split: {"texts": [str] (what latency is timed
        on), "labels": [...], "pairs": [str] or None, and any extra field ("words")}."""

    def check_test_rows(self, task, texts, labels, pairs, words) -> None:
        """Raise ShrinkbertError when test rows given to eval do not fit this kind."""

    @abstractmethod
    def texts(self, split) -> list:
        """The texts a stored split holds, as the tokenizer reads them: str, or (text, text_pair)
        tuples (vocabulary trimming keeps every token of these)."""

    # -- encoding and collating -------------------------------------------------------------------
    @abstractmethod
    def tokenize(self, dataset, tokenizer, task, max_length: int = 128, label_all_subtokens: bool = False):
        """A stored split (Dataset) or DatasetDict -> the same, tokenized: input_ids,
        attention_mask, token_type_ids (unpadded) and "labels" in this kind's shape; through
        `dataset.map` so `datasets` caches it. Raise ShrinkbertError on rows that do not fit."""

    @abstractmethod
    def encode(self, tokenizer, rows: Sequence[dict[str, Any]], max_length: int = 128, padding: Any = True,
               return_tensors: str | None = "np"):
        """Model inputs of rows, padded (a tokenizer BatchEncoding: `scored_logits` may read its
        word_ids/offsets)."""

    def collate_labels(self, values: list, width: int) -> list:
        """The "labels" of a batch's features, ready for torch.tensor: a kind whose labels are per
        token pads them to the batch's padded `width` (with the ignore index); default: as they are."""
        return values

    # -- models and outputs -----------------------------------------------------------------------
    def outputs(self, model_output, batch: dict) -> dict[str, Any]:
        """{name: tensor} of `output_names` from a transformers forward output (the teacher-output
        cache stores these; the KD loss compares them). Default: the attributes of those names."""
        return {name: getattr(model_output, name) for name in self.output_names}

    def train_step_loss(self, model_output, batch: dict):
        """(loss, {name: tensor} logged beside it) of one fine-tuning step from the model's forward output
        on a collated batch that carries this kind's targets. Default (sequence, token): the model's own
        loss on batch["labels"] and the accuracy at the labelled positions (-100 marks the rest)."""
        scored = batch["labels"] != -100  # every row for a classifier; labelled sub-tokens for a tagger (core.tagging.IGNORE)
        hits = (model_output.logits.argmax(-1) == batch["labels"])[scored]
        return model_output.loss, {"accuracy": hits.float().mean()}

    def pack_outputs(self, outputs: dict[str, Any]):
        """`outputs` as the one tensor the teacher-output cache stores ([B, C] or [B, L, C])."""
        return outputs["logits"]

    def unpack_outputs(self, packed) -> dict[str, Any]:
        """The `outputs` dict of a tensor `pack_outputs` made (as the cache hands it back, zero past
        each row's real tokens)."""
        return {"logits": packed}

    def importance_loss(self, model_output, batch: dict, labels: list):
        """The loss whose gradients rank heads and neurons for pruning (compress/importance.py), on one
        encoded batch of rows and their `gold_labels`: cross-entropy on the labels, or on the model's
        own predictions where rows carry none (a tagger: always, at every real token)."""
        import torch  # deferred: torch takes seconds to import

        logits, target = model_output.logits, labels
        if logits.dim() == 3:
            logits, target = logits[batch["attention_mask"].bool()], [None]
        target = torch.tensor(target) if all(t is not None for t in target) else logits.detach().argmax(-1)
        return torch.nn.functional.cross_entropy(logits, target)

    @abstractmethod
    def kd_loss(self, student: dict[str, Any], teacher: dict[str, Any], batch: dict, temperature: float):
        """The distillation loss at the outputs (a scalar tensor): student and teacher are `outputs`
        dicts (the teacher's may come from the cache, zero past each row's real tokens).
        Sequence/token: KL of softened logits, T^2-scaled (token: at labelled words only)."""

    @abstractmethod
    def hard_loss(self, student: dict[str, Any], batch: dict):
        """The loss against the gold labels in batch["labels"] (a scalar tensor); rows labelled by the
        teacher alone (students.augment.NO_LABEL) add nothing, and a batch of only those gives 0."""

    @abstractmethod
    def scored_logits(self, logits: np.ndarray, batch, rows: Sequence[dict[str, Any]] | None = None) -> np.ndarray:
        """A model's raw output array for one batch (torch or ONNX Runtime) -> the flat rows the kit
        compares and scores (sequence: as is; token: one row per word that fits). `batch` is
        `encode`'s BatchEncoding for `rows`, or a collated batch holding "labels"."""

    @abstractmethod
    def gold_labels(self, rows: Sequence[dict[str, Any]], task, id2label: dict | None, tokenizer=None,
                    max_length: int = 128) -> list:
        """Gold labels of rows in the model's own label ids, one per `scored_logits` row (a list of
        Nones when the rows are unlabelled). Where scoring needs row boundaries (entity F1) the list
        carries them (see token.WordLabels)."""

    def output_array(self, outputs: dict[str, Any]) -> np.ndarray:
        """The one raw array `scored_logits` reads, from a forward's outputs by name as numpy arrays
        (PyTorch's `outputs` or an ONNX Runtime session's named outputs). Default: "logits"."""
        return np.asarray(outputs["logits"])

    def predictions(self, scored: np.ndarray) -> np.ndarray:
        """Predicted label ids from `scored_logits` rows (default: arg-max)."""
        return np.asarray(scored).argmax(-1)

    @staticmethod
    def task_predictions(logits: np.ndarray, columns, task) -> list[int]:
        """Arg-max labels as the task's label indices (model outputs reordered by name where they
        differ: `columns`[i] is the model output of task label i, or None for index order)."""
        if columns is not None:
            logits = logits[:, columns]
        if logits.shape[1] != task.num_labels:
            raise ShrinkbertError(f"the model has {logits.shape[1]} outputs but task '{task.name}' "
                                  f"has {task.num_labels} labels")
        return [int(p) for p in logits.argmax(axis=1)]

    # -- metrics (through `evaluate`) -------------------------------------------------------------
    @abstractmethod
    def score(self, task, scored: np.ndarray, labels) -> dict[str, float | None]:
        """The task's metrics from `scored_logits` rows and `gold_labels` labels, through `evaluate`
        (core/metrics): {"accuracy": ...} and whatever else the task declares (entity_f1, ...).
        None values where the rows are unlabelled."""

    @abstractmethod
    def score_split(self, model, dataset, collate, task, batch_size: int = 64) -> dict[str, float]:
        """The task's scores (plus "loss") of a PyTorch model on a tokenized split."""

    def score_cached(self, task, outputs, dataset) -> dict[str, float] | None:
        """The task's scores from the teacher-output cache's outputs for a tokenized split (so the
        teacher need not run again); None when this kind cannot (the stage then runs the model)."""
        return None

    @abstractmethod
    def score_runner(self, runner, rows, columns, batch_size: int, max_length: int) -> dict[str, Any]:
        """The eval harness's scoring of one variant: `runner` is an eval runner (PyTorch, ONNX or
        bundle: runner.predict(texts, pairs, max_length) -> logits, runner.predict_words(...)),
        `rows` eval's TestRows, `columns` the model-to-task label order (`task_predictions`).
        Returns {"metrics": {...}, "n": rows, "predictions": [...], and any counts the report
        shows (token: "words", "words_dropped")}."""

    cache_identity: ClassVar[tuple[str, ...]] = ()
    """Extra parts of eval's measurement-cache key for artifacts of this kind (a change in how
    the kind is measured then invalidates old measurements of it only)."""

    scored_unit: ClassVar[str] = "rows"
    """What one scored row is, in messages and reports ("rows", "words")."""

    scores_words: ClassVar[bool] = False
    """True when the kind's test rows are words (eval reports word counts)."""

    # -- the edge bundle --------------------------------------------------------------------------
    bundle_module: ClassVar[str | None] = None
    """File name (in core/kinds/edge/) of the torch-free postprocessing module the bundle ships
    beside predict.py: numpy, tokenizers and onnxruntime only. The bundle copies it in and
    predict.py picks it by labels.json's "kind"."""

    def bundle_module_path(self) -> Path | None:
        """Path of `bundle_module` in this package (None: the kind ships none)."""
        return Path(__file__).with_name("edge") / self.bundle_module if self.bundle_module else None

    def bundle_meta(self, config) -> dict[str, Any]:
        """Entries this kind adds to a bundle's labels.json besides id2label/max_length/"kind"."""
        return {}

    def bundle_validation_meta(self, task, scored, labels) -> dict[str, Any]:
        """Entries of labels.json chosen on validation rows (a QA v2 null threshold): `scored` and
        `labels` are the bundled model's `scored_logits` and `gold_labels` there (task None: no rows)."""
        return {}

    def bundle_agreement(self, predictor, rows, task, tokenizer, max_length: int, source_scored, meta: dict):
        """{"same": n, "of": rows} of the bundle's user-facing predictions (its Predictor's) that equal
        the source model's, where parity of the scored rows does not already say so; `source_scored(rows)`
        runs the source model. None (the default): logit parity and label agreement suffice."""
        return None

    def int8_checks(self, task, fp32, int8, labels, tolerance: float) -> list[dict[str, Any]]:
        """What int8 must keep for this kind's outputs before its model is written, as `check` records:
        `fp32` and `int8` are the two graphs' `scored_logits` on the validation rows (or, without a
        task, example rows), `labels` their `gold_labels`. A failed check refuses the artifact unless
        --allow-unmet. The default: none (a classifier's int8 is judged by the report's paired test
        and by accuracy-aware mode)."""
        return []

    def __repr__(self) -> str:
        return f"<task kind {self.name}>"
