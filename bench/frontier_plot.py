"""Re-draw a frontier plot from a frontier's own figures, without re-running anything.

    python bench/frontier_plot.py runs/frontier/frontier.json runs/frontier/frontier.png  # from frontier.json
    python bench/frontier_plot.py runs/frontier/frontier.md runs/frontier/frontier.png    # from the raw table

The second form reads the raw table `shrinkbert frontier` wrote into frontier.md (the one
tests/data/frontier_table.md keeps one of): teacher and int8 rows, then per point its target,
shape A/H/L/F, seeds, retention mean ± sd and speed-ups. The plot is eval/plot.py's frontier_plot.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

SHAPE = re.compile(r"(\d+)L/H(\d+)/A(\d+)/F(\d+)")


def _number(cell: str) -> float:
    return float(re.sub(r"[^0-9.\-]", "", cell.split("±")[0]))


def table_from_markdown(text: str) -> dict:
    """The frontier.json figures the plot needs, from frontier.md's raw table (the one with A/F shapes)."""
    header = re.search(r"Frontier: .*?(\d+) test rows", text)
    text = text[header.start():] if header else text  # the raw table only, not the doc's other tables
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| ")]
    teacher = next(r for r in rows if r[0] == "teacher (PyTorch fp32)" and not r[1])
    teacher_int8 = next(r for r in rows if r[0] == "teacher O2+int8 ONNX" and not r[1])
    # columns: target | shape | seeds | retention | test acc | p50 ms | vs torch | vs int8 | MB | x smaller
    t_ms, ti_ms = _number(teacher[5]), _number(teacher_int8[5])
    table = {"test_rows": int(header.group(1)) if header else 0,
             "teacher": {"accuracy": _number(teacher[4]), "p50_ms": t_ms},
             "teacher_int8": {"accuracy": _number(teacher_int8[4]), "p50_ms": ti_ms}, "points": []}
    for row in rows:
        shape = SHAPE.fullmatch(row[1]) if len(row) > 1 else None
        if not shape:
            continue
        layers, hidden, heads, intermediate = (int(g) for g in shape.groups())
        retention = row[3].replace("%", "").split("±")
        table["points"].append({
            "speedup_target": None if row[0] == "shape given" else _number(row[0]),
            "shape": {"layers": layers, "hidden": hidden, "heads": heads, "intermediate": intermediate},
            "seeds": int(row[2]), "retention_mean": float(retention[0]) / 100,
            "retention_sd": float(retention[1]) / 100 if len(retention) > 1 else 0.0,
            "speedup_vs_torch": _number(row[6])})
    if not table["points"]:
        raise SystemExit("error: no frontier rows with a full shape (2L/H160/A5/F640) found")
    return table


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    source, target = Path(argv[0]), Path(argv[1])
    from shrinkbert.eval.plot import frontier_plot

    table = json.loads(source.read_text()) if source.suffix == ".json" else table_from_markdown(source.read_text())
    drawn = frontier_plot(table, target)
    print(f"{target}: {len(drawn['labels'])} points, the line through {', '.join(drawn['front'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
