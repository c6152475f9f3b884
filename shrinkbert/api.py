"""The Python API: one function per stage, keyword arguments spelled as the CLI's flags.

    from shrinkbert import finetune, distill, prune, export, quantize, bundle, report

    teacher = finetune(model="minilm", task="reviews.csv", text_column="body", label_column="category",
                       output_dir="runs/teacher", epochs=2)
    student = distill(teacher=teacher, layers=3, hidden=128, output_dir="runs/student")
    onnx = export(model=student, output_dir="runs/student-onnx")        # the task comes from the lineage
    int8 = quantize(model=onnx, output_dir="runs/student-int8")
    table = report(teacher, student, int8, output_dir="runs/report")
    print(teacher.metrics["test_accuracy"], int8.load())                # an ORTModelForSequenceClassification

Each stage function builds the same Config the CLI builds (unknown keys and bad values raise
ShrinkbertError with the CLI's one-line message) and calls the same `run`; it returns an
`Artifact`. Anywhere a path is expected, an Artifact works too.
"""
from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shrinkbert.stages import STAGES


@dataclass(frozen=True)
class Artifact:
    """A finished stage output on disk: its directory and its shrinkbert.json."""
    path: Path

    def __fspath__(self) -> str:  # os.fspath(artifact), open(), Path(artifact) all see the directory
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    @property
    def manifest(self) -> dict[str, Any]:
        from shrinkbert.core.artifacts import read_manifest

        return read_manifest(self.path)

    @property
    def stage(self) -> str:
        return self.manifest.get("stage", "")

    @property
    def metrics(self) -> dict[str, Any]:
        return self.manifest.get("metrics", {})

    @property
    def checks(self) -> list[dict[str, Any]]:
        return self.manifest.get("checks", [])

    @property
    def data(self) -> dict[str, Any] | None:
        """The data spec this artifact was made on (task, columns, label names, split seed)."""
        return self.manifest.get("data")

    def load(self):
        """The model to run: a transformers model (PyTorch artifacts), an Optimum ORTModel (ONNX
        artifacts) or the bundle's torch-free Predictor (edge bundles)."""
        from shrinkbert.core.models import load_model

        if (self.path / "predict.py").is_file() and (self.path / "labels.json").is_file():
            from shrinkbert.compress.edge_predictor import Predictor

            return Predictor(self.path)
        config = json.loads((self.path / "config.json").read_text()) if (self.path / "config.json").is_file() else {}
        architectures = config.get("architectures") or []
        token = any(a.endswith("ForTokenClassification") for a in architectures)
        if any(self.path.glob("*.onnx")):
            from optimum.onnxruntime import ORTModelForSequenceClassification, ORTModelForTokenClassification

            return (ORTModelForTokenClassification if token else ORTModelForSequenceClassification).from_pretrained(
                self.path)
        from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoModelForTokenClassification

        masked = any(a.endswith(("ForMaskedLM", "ForPreTraining")) for a in architectures)
        cls = (AutoModelForMaskedLM if masked else AutoModelForTokenClassification if token
               else AutoModelForSequenceClassification)
        return load_model(cls, self.path)

    def tokenizer(self):
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(self.path))


def _plain(value: Any) -> Any:
    """Artifacts and paths become the strings the Config fields hold."""
    if isinstance(value, (Artifact, Path)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def run_stage(name: str, **kwargs) -> Artifact:
    """Run one catalogue stage (the CLI's subcommand name) with keyword arguments; its Artifact."""
    from shrinkbert.core.config import build_config

    module = importlib.import_module(STAGES[name][0])
    config = build_config(module.Config, {k: _plain(v) for k, v in kwargs.items()})
    out = module.run(config)
    return Artifact(Path(out).resolve())


def pretrain(**kwargs) -> Artifact:
    """MLM (+NSP) pretraining, from scratch or continued (`shrinkbert pretrain --help`)."""
    return run_stage("pretrain", **kwargs)


def finetune(**kwargs) -> Artifact:
    """Fine-tune a teacher for classification (`shrinkbert finetune --help`)."""
    return run_stage("finetune", **kwargs)


def distill(teacher=None, student=None, dataset=None, tokenizer=None, **kwargs) -> Artifact:
    """Distil a teacher into a student (`shrinkbert distill --help`).

    teacher / student: artifact paths, Artifacts, or in-memory transformers models (then pass the
    teacher's `tokenizer`); dataset: a `datasets.Dataset` (split by `split_seed`) or `DatasetDict`
    (train/validation/test) with columns text [, text_pair], label. In-memory inputs are saved
    under `<output_dir>.inputs/` first, so the student's lineage can name them.
    """
    output_dir = Path(kwargs.get("output_dir") or "runs/student")
    inputs = output_dir.parent / (output_dir.name + ".inputs")
    if teacher is not None and not isinstance(teacher, (str, Path, Artifact)):
        teacher = _save_model(teacher, tokenizer, inputs / "teacher")
    if student is not None and not isinstance(student, (str, Path, Artifact)):
        student = _save_model(student, tokenizer, inputs / "student")
    if dataset is not None:
        kwargs["task"] = _save_dataset(dataset, inputs / "data")
    if teacher is not None:
        kwargs["teacher"] = teacher
    if student is not None:
        kwargs["student"] = student
    return run_stage("distill", **kwargs)


def prune(**kwargs) -> Artifact:
    """Structured pruning: remove heads and FFN neurons (`shrinkbert prune --help`)."""
    return run_stage("prune", **kwargs)


def sparsify(**kwargs) -> Artifact:
    """Unstructured magnitude pruning, baked in (`shrinkbert sparsify --help`)."""
    return run_stage("sparsify", **kwargs)


def trim_vocab(**kwargs) -> Artifact:
    """Keep only the tokens the task's text uses (`shrinkbert trim-vocab --help`)."""
    return run_stage("trim-vocab", **kwargs)


def export(**kwargs) -> Artifact:
    """ONNX export through Optimum, with a parity check (`shrinkbert export --help`)."""
    return run_stage("export", **kwargs)


def quantize(**kwargs) -> Artifact:
    """int8 through ONNX Runtime (`shrinkbert quantize --help`)."""
    return run_stage("quantize", **kwargs)


def bundle(**kwargs) -> Artifact:
    """The torch-free edge bundle (`shrinkbert bundle --help`)."""
    return run_stage("bundle", **kwargs)


def report(*artifacts, **kwargs) -> dict[str, Any]:
    """Measure artifacts side by side and write the report (`shrinkbert eval --help`); the report dict.

    Named `report`, not `evaluate`, so it never shadows the Hugging Face `evaluate` library.
    """
    from shrinkbert.eval.harness import make_config, run

    if artifacts:
        kwargs["artifacts"] = list(artifacts)
    result, files = run(make_config({k: _plain(v) for k, v in kwargs.items()}))
    return {**result, "files": {k: str(v) for k, v in files.items()}}


def _save_model(model, tokenizer, where: Path) -> Path:
    from shrinkbert.core.errors import ShrinkbertError

    if tokenizer is None:
        raise ShrinkbertError("an in-memory model needs its tokenizer: distill(..., tokenizer=tokenizer)")
    where.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(where, safe_serialization=True)
    tokenizer.save_pretrained(where)
    return where


def _save_dataset(dataset, where: Path) -> str:
    """A Dataset becomes one parquet file (split by split_seed); a DatasetDict a folder of splits."""
    import datasets

    where.mkdir(parents=True, exist_ok=True)
    if isinstance(dataset, datasets.DatasetDict):
        for name, split in dataset.items():
            split.to_parquet(str(where / f"{name}.parquet"))
        return str(where)
    dataset.to_parquet(str(where / "data.parquet"))
    return str(where / "data.parquet")
