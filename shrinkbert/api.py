"""The Python API: one function per stage, keyword arguments spelled as the CLI's flags.

    from shrinkbert import finetune, distill, prune, export, quantize, bundle, report

    teacher = finetune(model="minilm", task="reviews.csv", text_column="body", label_column="category",
                       output_dir="runs/teacher", epochs=2)
    student = distill(teacher=teacher, layers=3, hidden=128, output_dir="runs/student")
    onnx = export(model=student, output_dir="runs/student-onnx")        # the task comes from the lineage
    int8 = quantize(model=onnx, output_dir="runs/student-int8")
    table = report(teacher, student, int8, output_dir="runs/report")
    print(teacher.metrics["test_accuracy"], int8.load())                # an ORTModelForSequenceClassification

The stage functions (shrinkbert/functions.py) are generated from the stage registry (shrinkbert.stages)
by shrinkbert/codegen.py: each one's typed signature and docstring come from the stage's Config, so
`help(shrinkbert.distill)` lists every parameter with its default, bound and help text, as
`shrinkbert distill --help` does, and an IDE or type checker sees them. A call builds
the same Config the CLI builds (unknown keywords, wrong types and bounds raise ShrinkbertError
naming the keyword, `text_column=`) and calls the same `run`; it returns an `Artifact`. Anywhere
a path is expected, an Artifact works too; stages that read a PyTorch model also take an
in-memory transformers model and its tokenizer.
"""
from __future__ import annotations

import inspect
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shrinkbert.core.artifacts import read_manifest
from shrinkbert.core.config import options, speaking_as
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds import kind_of, kind_of_architectures
from shrinkbert.core.models import load_model
from shrinkbert.stages import API_STAGES, Stage, resolve


@dataclass(frozen=True)
class Artifact:
    """A finished stage output on disk: its directory and its shrinkbert.json.
    `Artifact("runs/squad/bundle")` takes a plain string as well as a Path."""
    path: Path

    def __post_init__(self):
        object.__setattr__(self, "path", Path(self.path))

    def __fspath__(self) -> str:  # os.fspath(artifact), open(), Path(artifact) all see the directory
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    @property
    def manifest(self) -> dict[str, Any]:
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
        """The model to run: the bundle's torch-free Predictor (edge bundles), an Optimum ORTModel (ONNX
        artifacts), or the PyTorch model as its task kind loads it (a transformers model; a sentence
        embedder's SentenceEncoder, whose output is the sentence vector)."""
        if self.stage == "bundle":
            return bundle_predictor(self.path)
        config = json.loads((self.path / "config.json").read_text()) if (self.path / "config.json").is_file() else {}
        architectures = config.get("architectures") or []
        if any(self.path.glob("*.onnx")):
            return kind_of_architectures(architectures).ort_class().from_pretrained(self.path)
        if any(a.endswith(("ForMaskedLM", "ForPreTraining")) for a in architectures):
            from transformers import AutoModelForMaskedLM

            return load_model(AutoModelForMaskedLM, self.path)
        return kind_of(self.path).load_torch(self.path)[0]  # the manifest's kind first (core/kinds)

    def tokenizer(self):
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(self.path))


def bundle_predictor(path: Path):
    """The kit's Predictor for an edge bundle: a classifier's, tagger's or QA model's (labels.json:
    compress/edge_predictor.py), or an embedding model's, graph or static (compress/static_predictor.py).
    The same classes the bundle ships as its predict.py."""
    if (path / "labels.json").is_file():
        from shrinkbert.compress.edge_predictor import Predictor
    else:
        from shrinkbert.compress.static_predictor import Predictor
    return Predictor(path)


def _plain(value: Any) -> Any:
    """Artifacts and paths become the strings the Config fields hold."""
    if isinstance(value, (Artifact, Path)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _is_model(value: Any) -> bool:
    from transformers import PreTrainedModel  # deferred: transformers costs seconds to import

    return isinstance(value, PreTrainedModel)


def _save_inputs(stage: Stage, values: dict[str, Any], tokenizer, dataset) -> dict[str, Any]:
    """In-memory models and datasets are saved under `<output_dir>.inputs/` (so the output's
    lineage can name them) and replaced by their paths; anything else that is not a path is refused."""
    models = {name: values[name] for name in stage.model_fields
              if values.get(name) is not None and not isinstance(values[name], (str, os.PathLike))}
    if not models and dataset is None:
        if tokenizer is not None:
            raise ShrinkbertError(f"{stage.api_name}(): tokenizer= goes with an in-memory model "
                                  f"({', '.join(f'{n}=' for n in stage.model_fields)})")
        return values
    if not values.get("output_dir"):
        raise ShrinkbertError(f"{stage.api_name}(): an in-memory input needs output_dir= (it is saved beside it)")
    output_dir = Path(values["output_dir"])
    inputs = output_dir.parent / (output_dir.name + ".inputs")
    for name, model in models.items():
        if not _is_model(model):
            raise ShrinkbertError(f"{name}= takes a path, an Artifact or a transformers PreTrainedModel, "
                                  f"got {type(model).__name__}")
        if tokenizer is None:
            raise ShrinkbertError(f"an in-memory {name}= needs its tokenizer: {stage.api_name}(..., tokenizer=tokenizer)")
        values[name] = str(_save_model(model, tokenizer, inputs / name))
    if dataset is not None:
        values["task"] = _save_dataset(dataset, inputs / "data")
    return values


def _call(stage: Stage, values: dict[str, Any], tokenizer=None, dataset=None):
    """Build the stage's Config from keywords and run it; errors name keywords (`text_column=`)."""
    with speaking_as("api", stage.config_class):
        values = _save_inputs(stage, {k: _plain(v) for k, v in values.items()}, tokenizer, dataset)
        return stage.run(stage.make_config(values))


def run_stage(name: str, **kwargs) -> Artifact:
    """Run one stage (a catalogue name such as "distill", or a user stage's dotted module path)
    with keyword arguments; its Artifact."""
    stage = resolve(name)
    tokenizer, dataset = kwargs.pop("tokenizer", None), kwargs.pop("dataset", None)
    if "tokenizer" in _config_fields(stage) and (tokenizer is None or isinstance(tokenizer, (str, os.PathLike))):
        kwargs["tokenizer"], tokenizer = tokenizer or "", None  # the Config's own field: a tokenizer directory
    return Artifact(Path(_call(stage, kwargs, tokenizer, dataset)).resolve())


def report_stage(*artifacts, **kwargs) -> dict[str, Any]:
    """The eval stage from Python (shrinkbert.report): the report dict."""
    if artifacts:
        kwargs["artifacts"] = list(artifacts)
    result, files = _call(API_STAGES["report"], kwargs)
    return {**result, "files": {k: str(v) for k, v in files.items()}}


def named(arguments: dict[str, Any], function) -> dict[str, Any]:
    """The keyword arguments a generated API function (shrinkbert/functions.py) was called with that
    differ from its defaults: what the caller named, as `**kwargs` would have held it."""
    defaults = {p.name: p.default for p in inspect.signature(function).parameters.values()
                if p.kind is inspect.Parameter.KEYWORD_ONLY}

    def unchanged(name: str, value: Any) -> bool:
        default = defaults[name]
        return value is default or (type(value) is type(default) and value == default)

    return {name: value for name, value in arguments.items() if name in defaults and not unchanged(name, value)}


def _config_fields(stage: Stage) -> set[str]:
    return {option.name for option in options(stage.config_class)}


def _save_model(model, tokenizer, where: Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(where, safe_serialization=True)
    tokenizer.save_pretrained(where)
    return where


def _save_dataset(dataset, where: Path) -> str:
    """A Dataset becomes one parquet file (split by split_seed); a DatasetDict a folder of splits."""
    import datasets  # deferred: datasets costs seconds to import

    if not isinstance(dataset, (datasets.Dataset, datasets.DatasetDict)):
        raise ShrinkbertError(f"dataset= takes a datasets.Dataset or DatasetDict, got {type(dataset).__name__}")
    where.mkdir(parents=True, exist_ok=True)
    if isinstance(dataset, datasets.DatasetDict):
        for name, split in dataset.items():
            split.to_parquet(str(where / f"{name}.parquet"))
        return str(where)
    dataset.to_parquet(str(where / "data.parquet"))
    return str(where / "data.parquet")
