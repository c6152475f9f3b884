"""Append what a bench measured to bench/results/<section>.jsonl: one line of JSON a run.

Every published figure has one home: a line written here by the bench that measured it, with the
date, the commit, the host (vendor, family/model, ISA, cores) and the command. `python bench/results.py`
turns the lines into docs/results.md; nothing else writes figures into the docs.

A bench calls

    from record import record          # bench/ is on sys.path when a bench runs as `python bench/x.py`
    record("serve-throughput", section="serving", title="Rows/s at 32 clients",
           rows=[{"server": "shrinkbert", "clients": 32, "rows_s": 812.0, "p99_ms": 41.0}, ...],
           note="closed loop, the demo's classifier bundle")

`rows` is the figure's table: one dict a row, the same keys in each (they become the columns, in the
first row's order). Intervals go in their own columns (`ci95_low`, `ci95_high`) or as a "mean ± sd"
string, so the data keeps them apart from the value. A value published with its unit ("12.8x",
"97.0%") may be stored as that string, so the page shows it as it was published.

`section` is one of SECTIONS' keys (the results page's headings, in order); a heading or a short
alias ("qa", "deploy") is accepted too. SHRINKBERT_RESULTS_DIR points the lines elsewhere (tests).
"""
from __future__ import annotations

import datetime
import decimal
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"

# The results page's sections, in its order: the key names the file, the heading makes the anchor.
SECTIONS = {
    "demo": "Demo",
    "classification": "Classification",
    "tagging": "Tagging",
    "question-answering": "Question answering",
    "embeddings": "Embeddings",
    "drop-in-query-encoders": "Drop-in query encoders",
    "base-size-teachers": "Base-size teachers",
    "frontier": "Frontier",
    "compact-students": "Compact students",
    "small-data": "Small data",
    "int8": "Int8",
    "latency": "Latency",
    "deploy-targets": "Deploy targets",
    "training": "Training",
    "serving": "Serving",
    "corpus-runs": "Corpus runs",
    "test-suite": "Test suite",
}
SECTION_ALIASES = {"qa": "question-answering", "drop-in": "drop-in-query-encoders",
                   "teachers": "base-size-teachers", "deploy": "deploy-targets",
                   "corpus": "corpus-runs", "tests": "test-suite", "token-tasks": "tagging",
                   "compact": "compact-students"}


def section_key(section: str) -> str:
    """The SECTIONS key for a key, a heading ("Question answering") or an alias ("qa").

    Raises:
        ValueError: a section the results page does not have.
    """
    key = "-".join(section.strip().lower().replace("_", "-").split())
    key = SECTION_ALIASES.get(key, key)
    if key not in SECTIONS:
        raise ValueError(f"unknown section {section!r}: one of {', '.join(SECTIONS)}")
    return key


def results_dir() -> Path:
    """Where the lines go: $SHRINKBERT_RESULTS_DIR when set, else bench/results."""
    return Path(os.environ["SHRINKBERT_RESULTS_DIR"]) if os.environ.get("SHRINKBERT_RESULTS_DIR") else RESULTS


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (Linux), or {}."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields


# The instruction sets that change an int8 or bf16 figure, in the order a reader looks for them.
ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def host() -> dict[str, Any]:
    """The machine a figure was measured on: vendor, model name, family/model, the ISA flags that
    matter for int8 and bf16, and the cores this process may use."""
    info = _cpuinfo()
    flags = set(info.get("flags", "").split())
    name = info.get("model name", platform.processor() or platform.machine())
    vendor = "AMD" if "AMD" in name else "Intel" if "Intel" in name else info.get("vendor_id", "")
    return {
        "vendor": vendor,
        "name": name,
        "family": int(info["cpu family"]) if info.get("cpu family", "").isdigit() else None,
        "model": int(info["model"]) if info.get("model", "").isdigit() else None,
        "isa": [flag for flag in ISA_FLAGS if flag in flags] or [platform.machine()],
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "gpu": None,
    }


def host_label(machine: dict[str, Any]) -> str:
    """'AMD EPYC family 25 model 17 (avx512_vnni, avx512_bf16), 2 cores' for a table's caption."""
    vendor_name = machine.get("name", "")
    if machine.get("vendor") and not vendor_name.startswith(machine["vendor"]):
        vendor_name = f"{machine['vendor']} {vendor_name}".strip()
    if machine.get("family") is not None:
        vendor_name += f" family {machine['family']} model {machine['model']}"
    label = vendor_name
    if machine.get("isa"):
        label += f" ({', '.join(f for f in machine['isa'] if f not in ('avx2', 'avx512f')) or 'avx2'})"
    if machine.get("cores"):
        label += f", {machine['cores']} cores"
    return label + (f", {machine['gpu']}" if machine.get("gpu") else "")


def _json_line(line: dict[str, Any]) -> str:
    """One line of JSON; a Decimal is written as the number it spells (0.80 keeps its zero)."""
    def spell(value: Any) -> str:
        if isinstance(value, decimal.Decimal):
            return f"{_DECIMAL}{value}"
        raise TypeError(f"{type(value).__name__} is not JSON: give rows plain numbers and text")
    text = json.dumps(line, ensure_ascii=False, default=spell)
    return re.sub(rf'"{_DECIMAL}([-+0-9.eE]+)"', r"\1", text)


_DECIMAL = "@decimal@"


def commit() -> str:
    """The checkout's short commit, with '+' when the tree has uncommitted changes to tracked files."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True, timeout=60).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "."], cwd=ROOT, timeout=60).returncode != 0
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return "unknown"
    return head + ("+" if dirty else "")


def command_line() -> str:
    """The command that ran this bench, as a user would type it from the repository root."""
    script = Path(sys.argv[0]).resolve()
    try:
        script_text = str(script.relative_to(ROOT))
    except ValueError:
        script_text = sys.argv[0]
    return " ".join(["python", script_text, *map(shlex.quote, sys.argv[1:])])


def record(figure: str, *, section: str, title: str, rows: list[dict[str, Any]], note: str = "",
           command: str | None = None, machine: dict[str, Any] | None = None,
           date: str | None = None, revision: str | None = None) -> dict[str, Any]:
    """Append one run of one figure to bench/results/<section>.jsonl and return the line written.

    Args:
        figure: the figure's id, stable across runs (the results page keeps each host's latest run).
        section: the results page's section (and the file's name): demo, classification, embeddings, ...
        title: the table's heading on the results page.
        rows: the table, one dict a row with the same keys.
        note: one sentence on what was measured and how (the workload, the settings).
        command: the command that produced it; default, this process's own command line.
        machine: the host; default, this machine (`host()`).
        date: the run's ISO date; default, today (a figure measured before it was recorded).
        revision: the short commit it ran at; default, this checkout's (`commit()`).

    Raises:
        ValueError: empty or ragged rows, or an unknown section.
    """
    if not rows or any(set(row) != set(rows[0]) for row in rows):
        raise ValueError(f"{figure}: rows must be a non-empty list of dicts with the same keys")
    section = section_key(section)
    line = {
        "figure": figure,
        "section": section,
        "title": title,
        "date": date or datetime.date.today().isoformat(),
        "commit": revision or commit(),
        "host": machine or host(),
        "command": command or command_line(),
        "note": note,
        "rows": rows,
    }
    folder = results_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{section}.jsonl", "a") as handle:
        handle.write(_json_line(line) + "\n")
    return line
