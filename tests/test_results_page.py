"""docs/results.md is made from bench/results/*.jsonl alone: current with the committed data, every line of
the data well formed, a host's latest run shown and an older one not, and every figure the other pages
cite present on it."""
import datetime
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import load_bench

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
HOST_KEYS = {"vendor", "family", "model", "isa", "cores"}

results = load_bench("results")
record = sys.modules["record"]


def result_lines():
    for path in sorted(RESULTS.glob("*.jsonl")):
        for number, text in enumerate(path.read_text().splitlines(), start=1):
            if text.strip():
                yield f"{path.name}:{number}", text


def test_the_page_is_current_with_the_data():
    done = subprocess.run([sys.executable, "bench/results.py", "--check"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


def test_every_line_has_the_schema():
    lines = list(result_lines())
    assert lines, "bench/results holds no runs"
    for where, text in lines:
        run = json.loads(text)
        assert {"figure", "section", "title", "date", "commit", "host", "command", "rows"} <= set(run), where
        assert run["section"] in record.SECTIONS, where
        assert Path(where.split(":")[0]).stem == run["section"], where
        assert datetime.date.fromisoformat(run["date"]), where
        assert re.fullmatch(r"[0-9a-f]{7,40}\+?", run["commit"]), where
        assert HOST_KEYS <= set(run["host"]) and isinstance(run["host"]["isa"], list), where
        assert run["figure"] and run["title"] and run["command"], where
        assert run["rows"] and all(set(row) == set(run["rows"][0]) for row in run["rows"]), where


def test_every_section_has_its_heading():
    page = (ROOT / "docs" / "results.md").read_text()
    for heading in record.SECTIONS.values():
        assert f"\n## {heading}\n" in page


AMD = {"vendor": "AMD", "name": "AMD EPYC", "family": 25, "model": 17, "isa": ["avx512_vnni"], "cores": 2, "gpu": None}
INTEL = {"vendor": "Intel", "name": "Intel Xeon", "family": 6, "model": 207, "isa": ["amx_bf16"], "cores": 2, "gpu": None}


def test_a_hosts_latest_run_is_shown_and_an_older_one_is_not(tmp_path, monkeypatch):
    monkeypatch.setenv("SHRINKBERT_RESULTS_DIR", str(tmp_path))
    for date, speed, machine in [("2026-01-01", "3.1x", AMD), ("2026-01-02", "4.2x", AMD),
                                 ("2026-01-01", "5.3x", INTEL)]:
        record.record("speed", section="qa", title="Speed", rows=[{"variant": "int8", "speed-up": speed}],
                      command="python bench/x.py", machine=machine, date=date, revision="abc1234")
    assert (tmp_path / "question-answering.jsonl").exists()
    page = results.render_page(results.load_runs(tmp_path))
    section = page.split("## Question answering")[1].split("\n## ")[0]
    assert "4.2x" in section and "5.3x" in section and "3.1x" not in section
    assert section.index("4.2x") < section.index("5.3x")          # the most recent host first
    assert record.host_label(AMD) in section and "2026-01-02" in section and "`python bench/x.py`" in section
    assert "No runs recorded yet" in page.split("## Demo")[1].split("\n## ")[0]

    readme = tmp_path / "README.md"
    readme.write_text("a\n<!-- results:speed -->\nold\n<!-- /results -->\nb\n")
    text = results.outputs(results.load_runs(tmp_path), page=tmp_path / "results.md", readme=readme)[readme]
    assert "4.2x" in text and "old" not in text and record.host_label(AMD) in text
    assert text.startswith("a\n<!-- results:speed -->\n") and text.endswith("<!-- /results -->\nb\n")


def test_stored_digits_survive_the_round_trip(tmp_path, monkeypatch):
    from decimal import Decimal
    monkeypatch.setenv("SHRINKBERT_RESULTS_DIR", str(tmp_path))
    record.record("acc", section="Demo", title="Accuracy", rows=[{"accuracy": Decimal("0.8500"), "ms": 1.5}],
                  machine=AMD)
    page = results.render_page(results.load_runs(tmp_path))
    assert "| 0.8500 | 1.5 |" in page


def test_a_bad_line_is_one_error_and_nothing_written(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SHRINKBERT_RESULTS_DIR", str(tmp_path))
    (tmp_path / "demo.jsonl").write_text('{"figure": "x"}\n')
    with pytest.raises(results.ResultsError, match="lacks"):
        results.load_runs(tmp_path)
    monkeypatch.setattr(results, "PAGE", tmp_path / "results.md")
    assert results.main([]) == 1
    assert capsys.readouterr().err.startswith("error: ") and not (tmp_path / "results.md").exists()
    with pytest.raises(ValueError, match="unknown section"):
        record.record("x", section="nowhere", title="t", rows=[{"a": 1}], machine=AMD)


# A figure as the docs cite one: a percentage, a speed-up or a mean ± sd.
FIGURE = re.compile(r"(?<![\w.])(?:\d+(?:\.\d+)?(?:%|x)(?![\w])|\d+(?:\.\d+)? ± \d+(?:\.\d+)?%?)")


def test_docs_hold_no_figure_results_lacks():
    """Every figure-like number on the other pages (whichever exist) is on docs/results.md too."""
    page = (ROOT / "docs" / "results.md").read_text()
    missing = {}
    for doc in sorted((ROOT / "docs").glob("*.md")):
        if doc.name == "results.md":
            continue
        prose = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
        lacking = sorted({figure for figure in FIGURE.findall(prose) if figure not in page})
        if lacking:
            missing[doc.name] = lacking[:12]
    assert not missing, f"figures the results page lacks: {missing}"
