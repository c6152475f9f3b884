"""The stage contract and its registry: the one place that says which stages exist.

A stage is a module with
    Config   a dataclass of `core.config.field`s: every flag, YAML key and Python keyword, declared
             in its room's configs.py (no heavy imports: `shrinkbert NAME --help` reads it alone),
    run      run(config) -> the output artifact's path (eval: the report and its files),
    main     main(argv, prog=None, description=None) -> exit code: its `python -m` entry (what
             the recipe runner and `accelerate launch -m` start), optionally `make_config(values)`
             when building its Config needs more than `build_config` (eval's `quick`).
The registry below names each one once, with its one-line summary; the CLI's subcommands and
their help, the Python API's functions and docstrings (shrinkbert.api) and the recipe runner's
`uses:` lookup are all generated from it. A recipe may also name a user-defined stage by its
dotted module path (`uses: mypkg.mystage`): `resolve` gives it the same contract.

Modules are imported only when a stage runs: `shrinkbert --help` and `shrinkbert NAME --help`
read the registry and the stage's Config (`config`), never torch.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

from shrinkbert.core.config import build_config, make_parser

HELP_FLAGS = frozenset({"-h", "--help"})


def _attribute(where: str) -> Any:
    """`module:name` -> that attribute (the module imported)."""
    module, _, name = where.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Stage:
    name: str                      # the CLI subcommand and a recipe's `uses:`
    module: str                    # dotted path of the module holding Config, run and main
    summary: str                   # one line: `shrinkbert --help`, `shrinkbert NAME --help`, help(shrinkbert.NAME)
    api_name: str | None = None    # its Python API function (None: CLI and recipes only)
    trains: bool = False           # may run on several processes under `accelerate launch`
    model_fields: tuple[str, ...] = ()  # Config fields naming a PyTorch model: the API also takes an in-memory one
    takes_dataset: bool = False    # the API also takes an in-memory `datasets.Dataset` (saved, then `task`)
    config: str = ""               # "module:Class" of its Config in a light module (its room's configs.py)
    parser: str = ""               # "module:function(description, prog)" where the command line has more than
                                   # the Config's flags (eval's positional artifacts); default core.config.make_parser

    def load(self) -> ModuleType:
        """The stage's module (imported on first use: the heavy libraries come with it)."""
        return importlib.import_module(self.module)

    @property
    def config_class(self) -> type | None:
        """The stage's Config, from its light module where the registry names one (no torch)."""
        if self.config:
            return _attribute(self.config)
        return getattr(self.load(), "Config", None)

    def help_parser(self):
        """The stage's argparse parser as `shrinkbert NAME --help` prints it."""
        if self.parser:
            return _attribute(self.parser)(self.summary, self.prog)
        return make_parser(self.config_class, self.summary, self.prog)

    @property
    def run(self) -> Callable[[Any], Any]:
        return self.load().run

    @property
    def prog(self) -> str:
        return f"shrinkbert {self.name}"

    def make_config(self, values: dict[str, Any]):
        """The stage's Config from plain values: unknown keys, wrong types, bounds all refused."""
        module = self.load()
        custom = getattr(module, "make_config", None)
        return custom(values) if custom else build_config(module.Config, values)

    def cli(self, argv: list[str]) -> int:
        """`shrinkbert NAME ARGS`: the stage's own front (flags, --config FILE, --help), under the
        name the user typed. `--help` is answered from the Config alone, without importing the stage."""
        if HELP_FLAGS & set(argv):
            self.help_parser().parse_args(argv)  # prints the help and exits 0 (or one error line, exit 2)
        return self.load().main(argv, prog=self.prog, description=self.summary) or 0


STAGES: dict[str, Stage] = {stage.name: stage for stage in (
    Stage("tokenizer", "shrinkbert.teachers.tokenizer", "train a WordPiece tokenizer on text",
          config="shrinkbert.teachers.configs:TokenizerConfig"),
    Stage("pretrain", "shrinkbert.teachers.pretrain", "MLM (+NSP) pretraining, from scratch or continued",
          api_name="pretrain", trains=True, config="shrinkbert.teachers.configs:PretrainConfig"),
    Stage("finetune", "shrinkbert.teachers.finetune", "fine-tune a teacher: text (pair) classification, tagging, extractive QA or sentence embeddings",
          api_name="finetune", trains=True, model_fields=("model",), takes_dataset=True,
          config="shrinkbert.teachers.configs:FinetuneConfig"),
    Stage("distill", "shrinkbert.students.distill", "distil a teacher into a student of a target size",
          api_name="distill", trains=True, model_fields=("teacher", "student"), takes_dataset=True,
          config="shrinkbert.students.configs:DistillConfig"),
    Stage("prune", "shrinkbert.compress.prune", "structured pruning: remove attention heads and FFN neurons",
          api_name="prune", model_fields=("model",), config="shrinkbert.compress.configs:PruneConfig"),
    Stage("sparsify", "shrinkbert.compress.sparsify", "unstructured magnitude pruning, baked in",
          api_name="sparsify", model_fields=("model",), config="shrinkbert.compress.configs:SparsifyConfig"),
    Stage("trim-vocab", "shrinkbert.compress.trim_vocab", "keep only the tokens a corpus uses",
          api_name="trim_vocab", model_fields=("model",), config="shrinkbert.compress.configs:TrimVocabConfig"),
    Stage("export", "shrinkbert.compress.export", "ONNX export through Optimum, with a parity check",
          api_name="export", model_fields=("model",), config="shrinkbert.compress.configs:ExportConfig"),
    Stage("quantize", "shrinkbert.compress.quantize", "int8 through ONNX Runtime (dynamic, static, accuracy-aware)",
          api_name="quantize", config="shrinkbert.compress.configs:QuantizeConfig"),
    Stage("bundle", "shrinkbert.compress.bundle", "edge bundle: int8 ONNX + tokenizer + torch-free predictor",
          api_name="bundle", config="shrinkbert.compress.configs:BundleConfig"),
    Stage("eval", "shrinkbert.eval.harness", "measure variants: accuracy, latency, size; the report",
          api_name="report", config="shrinkbert.eval.configs:EvalConfig",
          parser="shrinkbert.eval.configs:eval_parser"),
    Stage("frontier", "shrinkbert.frontier", "students at a ladder of speed-ups over seeds: one table, one plot",
          config="shrinkbert.configs:FrontierConfig"),
)}

# Stages that train, and so may run on several processes under `accelerate launch`.
TRAINING_STAGES = {name for name, stage in STAGES.items() if stage.trains}
# The Python API's function names -> stages.
API_STAGES = {stage.api_name: stage for stage in STAGES.values() if stage.api_name}


def resolve(uses: str) -> Stage:
    """A catalogue name, or a dotted module path (a user-defined stage with the same contract)."""
    return STAGES.get(uses) or Stage(uses, uses, "")
