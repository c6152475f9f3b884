"""The `shrinkbert` command: one subcommand per stage, plus `run` for recipes.

Subcommands are imported only when called, so `shrinkbert --help` answers at once.
"""
from __future__ import annotations

import importlib
import sys

from shrinkbert.stages import STAGES

USAGE = "usage: shrinkbert COMMAND [options]   (shrinkbert COMMAND --help for its options)"


def _help() -> str:
    lines = [USAGE, "", "Make BERT classifiers small and fast, with one honest report.", "", "commands:"]
    lines.append(f"  {'run':<11} run a recipe: every stage from corpus to edge bundle and report")
    for name, (_, summary) in STAGES.items():
        lines.append(f"  {name:<11} {summary}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_help())
        return 0
    command, rest = argv[0], argv[1:]
    if command == "run":
        from shrinkbert.recipe import main as run_main

        return run_main(rest)
    if command not in STAGES:
        print(f"error: unknown command '{command}'; commands: run, {', '.join(STAGES)}", file=sys.stderr)
        return 2
    module = importlib.import_module(STAGES[command][0])
    return module.main(rest) or 0


if __name__ == "__main__":
    sys.exit(main())
