"""Make docs/results.md (and README.md's marked tables) from bench/results/*.jsonl.

    python bench/results.py            # write docs/results.md and README.md's marked tables
    python bench/results.py --check    # exit 1, with one line, when either differs from the data

Each line of bench/results/<section>.jsonl is one run of one figure, as `record.record(...)` wrote it.
The page holds one `## Section` per section in a fixed order (every heading always, so other pages can
link to its anchor), one `### Title` per figure, and under it one table per host: the latest run of
that figure on that host, with its host, date, commit, command and note. Older runs stay in the data
and in git. README.md may carry `<!-- results:FIGURE_ID -->` ... `<!-- /results -->` pairs; the text
between them becomes that figure's latest run on any host. The output depends on the data alone.
"""
from __future__ import annotations

import argparse
import decimal
import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import ROOT, SECTIONS, host_label, results_dir  # noqa: E402

PAGE = ROOT / "docs" / "results.md"
README = ROOT / "README.md"

# The bench whose runs a section holds, named where the section is empty.
SECTION_BENCH = {
    "small-data": "bench/small_data.py",
    "int8": "bench/int8.py",
    "latency": "bench/gemm_floor.py",
    "deploy-targets": "bench/deploy.py",
    "training": "bench/mfu.py",
    "compact-students": "bench/compact_students.py",
}

INTRO = """\
# Results

Every figure the kit's documentation cites, as measured. Each table names the host it ran on, the
date, the commit and the command that reproduces it; a table shows the latest run of its figure on
that host. This page is generated from `bench/results/*.jsonl` by `python bench/results.py` (never
edit it by hand); older runs stay in those files and in git. A bench adds a run with
`record(...)` from `bench/record.py`.
"""

MARKER = re.compile(r"(<!-- results:(?P<figure>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /results -->)", re.S)
REQUIRED = ("figure", "section", "title", "date", "commit", "host", "command", "rows")


class ResultsError(Exception):
    """A results file that cannot be read as runs."""


def load_runs(folder: Path | None = None) -> list[dict[str, Any]]:
    """Every run in `folder`'s *.jsonl (default: `record.results_dir()`), in file then line order.

    Numbers are read as Decimal, so a value keeps the digits it was stored with (0.80 stays 0.80).

    Raises:
        ResultsError: a line that is not JSON, lacks a field, or names an unknown section.
    """
    folder = folder or results_dir()
    runs = []
    for path in sorted(folder.glob("*.jsonl")):
        for number, text in enumerate(path.read_text().splitlines(), start=1):
            if not text.strip():
                continue
            where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{number}"
            try:
                run = json.loads(text, parse_float=decimal.Decimal)
            except json.JSONDecodeError as exc:
                raise ResultsError(f"{where}: not JSON ({exc.msg})") from None
            missing = [key for key in REQUIRED if key not in run]
            if missing:
                raise ResultsError(f"{where}: lacks {', '.join(missing)}")
            if run["section"] not in SECTIONS:
                raise ResultsError(f"{where}: unknown section {run['section']!r}")
            if not run["rows"] or any(set(row) != set(run["rows"][0]) for row in run["rows"]):
                raise ResultsError(f"{where}: rows must be non-empty with the same keys")
            run["_order"] = len(runs)
            runs.append(run)
    return runs


def latest(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The most recent run: the latest date, and of one date the one written last."""
    return max(runs, key=lambda run: (run["date"], run["_order"]))


def cell(value: Any) -> str:
    """A table cell: numbers with their stored digits, text as it is, none as a dash."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(cell(item) for item in value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def _numeric(value: Any) -> bool:
    return (isinstance(value, (int, decimal.Decimal)) and not isinstance(value, bool)) or (
        isinstance(value, str) and bool(re.fullmatch(r"[-+]?[\d.,]+\s*(x|%|ms|s|MB|min)?", value)))


def table(rows: list[dict[str, Any]]) -> list[str]:
    """A Markdown table: the first row's keys as columns, numeric columns right-aligned."""
    columns = list(rows[0])
    def right(col: str) -> bool:
        values = [row[col] for row in rows if row[col] not in (None, "–", "-", "")]
        return bool(values) and all(_numeric(value) for value in values)
    align = ["--:" if right(col) else "---" for col in columns]
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(cell(row[col]) for col in columns) + " |" for row in rows]
    return lines


def caption(run: dict[str, Any]) -> str:
    """The line under a table: host, date, commit, command and note."""
    text = f"{host_label(run['host'])}; {run['date']}; commit {run['commit']}; `{run['command']}`."
    note = run.get("note", "").strip()
    return text + (f" {note}" if note else "")


def figure_block(figure_runs: list[dict[str, Any]]) -> list[str]:
    """One figure: its heading, then the latest run on each host, the most recent host first."""
    by_host: dict[str, list[dict[str, Any]]] = {}
    for run in figure_runs:
        by_host.setdefault(host_label(run["host"]), []).append(run)
    shown = sorted((latest(host_runs) for host_runs in by_host.values()),
                   key=lambda run: (run["date"], run["_order"]), reverse=True)
    lines = [f'<a id="{figure_runs[0]["figure"]}"></a>', "", f"### {latest(figure_runs)['title']}", ""]
    for run in shown:
        lines += table(run["rows"]) + ["", caption(run), ""]
    return lines


def render_page(runs: list[dict[str, Any]]) -> str:
    """docs/results.md's text for these runs."""
    lines = [INTRO]
    for section, heading in SECTIONS.items():
        lines += [f"## {heading}", ""]
        in_section = [run for run in runs if run["section"] == section]
        if not in_section:
            bench = SECTION_BENCH.get(section)
            lines += [f"No runs recorded yet: `python {bench}` records them." if bench
                      else "No runs recorded yet.", ""]
            continue
        figures: dict[str, list[dict[str, Any]]] = {}
        for run in in_section:
            figures.setdefault(run["figure"], []).append(run)
        for figure_runs in figures.values():
            lines += figure_block(figure_runs)
    return "\n".join(lines).rstrip("\n") + "\n"


def render_readme(text: str, runs: list[dict[str, Any]]) -> str:
    """README.md's text with each marked figure's latest run between its markers.

    Raises:
        ResultsError: a marker that names a figure with no runs.
    """
    def replace(match: re.Match) -> str:
        figure_runs = [run for run in runs if run["figure"] == match["figure"]]
        if not figure_runs:
            raise ResultsError(f"README.md names figure {match['figure']!r}, which has no runs")
        run = latest(figure_runs)
        body = "\n".join(table(run["rows"]) + ["", caption(run)]) + "\n"
        return match.group(1) + body + match.group(4)
    return MARKER.sub(replace, text)


def outputs(runs: list[dict[str, Any]], page: Path = PAGE, readme: Path = README) -> dict[Path, str]:
    """The files to write and their text: the page, and README.md where it holds markers."""
    wanted = {page: render_page(runs)}
    if readme.exists():
        text = readme.read_text()
        if MARKER.search(text):
            wanted[readme] = render_readme(text, runs)
    return wanted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Make docs/results.md from bench/results/*.jsonl.")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when docs/results.md or README.md's tables are stale")
    args = parser.parse_args(argv)
    try:
        wanted = outputs(load_runs())
    except ResultsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.check:
        stale = [path for path, text in wanted.items() if not path.exists() or path.read_text() != text]
        if stale:
            names = " and ".join(str(path.relative_to(ROOT)) for path in stale)
            verb = "differs" if len(stale) == 1 else "differ"
            print(f"error: {names} {verb} from bench/results/*.jsonl: run python bench/results.py",
                  file=sys.stderr)
            return 1
        return 0
    for path, text in wanted.items():
        if not path.exists() or path.read_text() != text:
            temporary = path.with_name(path.name + ".tmp")
            temporary.write_text(text)
            temporary.replace(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
