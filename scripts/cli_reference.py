"""The command-line reference page (docs/reference/cli.md), made from the code it documents.

    python scripts/cli_reference.py              # print the page (Markdown) to stdout
    python scripts/cli_reference.py --out FILE   # write it to FILE

mkdocs runs this file as a hook (mkdocs.yml `hooks:`): at every build `on_files` adds the page to the
site, generated from the stage registry (shrinkbert.stages.STAGES: each stage's summary and its
Config's flags, groups, bounds, defaults and help) and, for the commands that are not stages (`run`,
`predict`, ...), from their own `--help`. The page is not kept in git: it cannot go stale, and a
change to a Config's help text needs no second step beside `python -m shrinkbert.codegen`.
Reading it needs no torch: `--help` is answered from the Configs alone.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script or loaded by mkdocs from any working directory
    sys.path.insert(0, str(ROOT))

PAGE = "reference/cli.md"
COMMAND_LINE = re.compile(r"^  (?P<name>[a-z][\w-]*)\s+(?P<summary>\S.*)$")
HELP_WIDTH = "100"  # argparse wraps --help at $COLUMNS: fixed, so the page is the same on every machine

INTRO = """# Command line

Every stage of the kit is a subcommand of `shrinkbert`, a Python function of the same name
(`shrinkbert.NAME`, with `-` as `_`; `eval` is `shrinkbert.report`: [Python API](api.md)) and a
recipe step (`uses: NAME`: [Recipes](../recipes.md)). One option is a flag here, a keyword in Python
and a key in a recipe's `with:` or a `--config FILE`, spelled the same way (`--max-length` is
`max_length`). Flags override the `--config` file. A bad value is one `error:` line and exit status 2,
and nothing is written.

This page is generated from the code at every build of the site; `shrinkbert NAME --help` prints
the same options.
"""


def _escape(text: str) -> str:
    """Help text as one Markdown table cell: pipes, angle brackets and asterisks are literal."""
    text = " ".join(text.split())
    for char, escaped in (("\\", "\\\\"), ("|", "\\|"), ("*", "\\*"), ("<", "&lt;")):
        text = text.replace(char, escaped)
    return text


def _invocation(action: argparse.Action) -> str:
    """`--flag VALUE`, `--[no-]flag`, `ART` as a reader types them."""
    if not action.option_strings:
        return action.metavar or action.dest
    if isinstance(action, argparse.BooleanOptionalAction):
        return " / ".join(action.option_strings)
    names = ", ".join(action.option_strings)
    if action.nargs == 0:
        return names
    if action.metavar:
        return f"{names} {action.metavar}"
    if action.choices:
        return f"{names} {{{','.join(map(str, action.choices))}}}"
    return f"{names} {action.dest.upper()}"


def _options_table(parser: argparse.ArgumentParser) -> list[str]:
    """The parser's options, group by group, as the reader's `--help` lists them."""
    groups: dict[str, list[argparse.Action]] = {}
    for group in parser._action_groups:  # argparse keeps its groups only here; --help reads the same list
        # argparse's own "options" (--config, --no-verify) and a Config's group of that name are one table
        groups.setdefault(group.title or "options", []).extend(
            a for a in group._group_actions if a.help is not argparse.SUPPRESS and not isinstance(a, argparse._HelpAction))
    lines: list[str] = []
    for title, actions in groups.items():
        if actions:
            lines += ["", f"**{title}**", "", "| option | what it does |", "|---|---|"]
            lines += [f"| `{_invocation(a)}` | {_escape(a.help or '')} |" for a in actions]
    return lines


def _commands() -> list[tuple[str, str]]:
    """(name, summary) of every `shrinkbert` command, in the order `shrinkbert --help` lists them."""
    from shrinkbert import cli

    commands, listed = [], False
    for line in cli._help().splitlines():
        if line.strip() == "commands:":
            listed = True
        elif listed and (match := COMMAND_LINE.match(line)):
            commands.append((match["name"], match["summary"]))
    return commands


def _captured_help(command: str) -> str:
    """`shrinkbert COMMAND --help` as printed, for a command that is not a stage."""
    from shrinkbert import cli

    out = io.StringIO()
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            cli.main([command, "--help"])
    finally:
        if saved is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved
    return out.getvalue().rstrip()


def _stage_section(name: str, summary: str) -> list[str]:
    from shrinkbert.stages import STAGES

    stage = STAGES[name]
    python = f"`shrinkbert.{stage.api_name}`" if stage.api_name else "none (command line and recipes)"
    lines = [f"## shrinkbert {name}", "", f"{summary[:1].upper()}{summary[1:]}.", "",
             f"Python: {python}. Recipe step: `uses: {name}`.", "",
             "```text", f"shrinkbert {name} [--config FILE] [--OPTION VALUE ...]", "```"]
    return lines + _options_table(stage.help_parser())


def _command_section(name: str, summary: str) -> list[str]:
    return [f"## shrinkbert {name}", "", f"{summary[:1].upper()}{summary[1:]}.", "",
            "```text", _captured_help(name), "```"]


def render() -> str:
    """The whole page."""
    from shrinkbert.stages import STAGES

    commands = _commands()
    lines = [INTRO, "| command | what it does |", "|---|---|"]
    lines += [f"| [`shrinkbert {name}`](#shrinkbert-{name}) | {_escape(summary)} |" for name, summary in commands]
    for name, summary in commands:
        lines.append("")
        lines += _stage_section(name, summary) if name in STAGES else _command_section(name, summary)
    return "\n".join(lines) + "\n"


def on_files(files, config):
    """mkdocs hook: add the generated page to the site's files (before the nav is resolved)."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=render()))
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="write the page here (default: print it)")
    args = parser.parse_args(argv)
    page = render()
    if args.out:
        args.out.write_text(page, encoding="utf-8")
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
