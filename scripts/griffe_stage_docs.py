"""A griffe extension for the docs site: the stage functions' parameters as tables.

shrinkbert/functions.py is generated (shrinkbert/codegen.py) with docstrings that `help()` prints
well: the summary, then the parameters under their groups (Model:, Data:, ...), each as
`name: type = default` and an indented help line. Google style has no groups, so mkdocstrings would
run each group into one paragraph. mkdocs.yml loads this extension for the python handler; it
rewrites those groups, in the docs only, into one Markdown table each (parameter, type, default,
what it does). The docstrings in the package stay as they are.
"""
from __future__ import annotations

import re
from typing import Any

import griffe

MODULE = "shrinkbert.functions"
GROUP = re.compile(r"^(?P<title>[A-Z][\w ,+()-]*):$")
PARAMETER = re.compile(r"^    (?P<name>\w+): (?P<type>.+?) = (?P<default>.*)$")


def _cell(text: str) -> str:
    """One table cell: pipes and angle brackets literal."""
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;")


def _code(text: str) -> str:
    return "`" + text.replace("|", "\\|") + "`"


def tables(docstring: str) -> str:
    """The docstring with each `Group:` block of parameters as a Markdown table."""
    out: list[str] = []
    rows: list[list[str]] = []

    def flush() -> None:
        if rows:
            out.extend(["| parameter | type | default | what it does |", "|---|---|---|---|"])
            out.extend(f"| {_code(name)} | {_code(kind)} | {_code(default)} | {_cell(' '.join(help))} |"
                       for name, kind, default, *help in rows)
            out.append("")
            rows.clear()

    for line in docstring.splitlines():
        group, parameter = GROUP.match(line), PARAMETER.match(line)
        if group and not line.startswith(" "):
            flush()
            out.extend([f"**{group['title']}**", ""])
        elif parameter:
            rows.append([parameter["name"], parameter["type"], parameter["default"]])
        elif rows and line.startswith("        "):
            rows[-1].append(line.strip())
        elif rows and not line.strip():
            continue
        else:
            flush()
            out.append(line.replace("<", "&lt;") if not line.startswith("    ") else line)
    flush()
    return "\n".join(out).rstrip() + "\n"


class StageTables(griffe.Extension):
    """Rewrite the grouped parameter lists of shrinkbert/functions.py's docstrings as tables."""

    def on_function_instance(self, *, node: Any, func: griffe.Function, agent: Any, **kwargs: Any) -> None:
        if func.module.path == MODULE and func.docstring is not None:
            func.docstring.value = tables(func.docstring.value)
