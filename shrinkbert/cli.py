"""The `shrinkbert` command: one subcommand per registered stage (shrinkbert.stages), plus `run`
for recipes.

A subcommand's module is imported only when it is called, so `shrinkbert --help` answers at once.
"""
from __future__ import annotations

import sys

from shrinkbert import recipe
from shrinkbert.stages import STAGES

USAGE = "usage: shrinkbert COMMAND [options]   (shrinkbert COMMAND --help for its options)"
RUN_SUMMARY = "run a recipe: every stage from corpus to edge bundle and report"
PREDICT_SUMMARY = "run a bundle over a corpus (csv, jsonl, parquet, text) into Parquet shards; resumable, on Dask"
SERVE_SUMMARY = "serve a bundle over HTTP (OpenAI and text-embeddings-inference routes), batched, with metrics"


def _help() -> str:
    lines = [USAGE, "", "Make BERT-family encoders small and fast — sentence and pair classifiers, token taggers (NER, POS), "
             "extractive QA and sentence embedders: distillation, pruning, int8 ONNX, edge bundles, one honest report.", "", "commands:"]
    lines.append(f"  {'run':<11} {RUN_SUMMARY}")
    lines.append(f"  {'predict':<11} {PREDICT_SUMMARY}")
    lines.append(f"  {'serve':<11} {SERVE_SUMMARY}")
    for name, stage in STAGES.items():
        lines.append(f"  {name:<11} {stage.summary}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_help())
        return 0
    command, rest = argv[0], argv[1:]
    if command == "run":
        return recipe.main(rest)
    if command == "predict":  # writes a table, not an artifact: no stage
        from shrinkbert.deploy.corpus_cli import main as predict_main

        return predict_main(rest)
    if command == "serve":  # a running server, not an artifact: no stage
        from shrinkbert.deploy.launch import main as serve_main

        return serve_main(rest)
    if command not in STAGES:
        print(f"error: unknown command '{command}'; commands: run, predict, serve, {', '.join(STAGES)}", file=sys.stderr)
        return 2
    return STAGES[command].cli(rest)


if __name__ == "__main__":
    sys.exit(main())
