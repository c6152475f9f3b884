"""Static tools read the package as the interpreter does. pyright, run on tests/ from the repository root,
resolves every shrinkbert import (shrinkbert/core, /eval, ... are links to the rooms at the top level,
so no import hook is needed to find them), and sees the API's parameters: a misspelt keyword is
reported before anything runs. The same run type-checks examples/ (one pyright start: it takes a minute)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pyright(*paths: str | Path) -> list[dict]:
    pyright = shutil.which("pyright", path=str(Path(sys.executable).parent)) or shutil.which("pyright")
    assert pyright, "pyright is not installed: run scripts/setup.sh (requirements.txt pins it)"
    done = subprocess.run([pyright, "--outputjson", "--pythonpath", sys.executable, *map(str, paths)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.stdout.strip().startswith("{"), done.stderr[-2000:] or done.stdout[-2000:]
    return json.loads(done.stdout)["generalDiagnostics"]


def test_pyright_resolves_every_shrinkbert_import_and_the_apis_parameters(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import shrinkbert\n"
                     "from shrinkbert.students.distill import Config\n"
                     "shrinkbert.distill(teacher='runs/teacher', temprature=4.0)\n")
    examples = sorted((ROOT / "examples").glob("*.py"))
    diagnostics = _pyright("tests", *examples, probe)
    in_examples = [f"{Path(d['file']).name}:{d['range']['start']['line'] + 1}: {d['message']}" for d in diagnostics
                   if d["severity"] == "error" and Path(d["file"]).parent == ROOT / "examples"]
    assert not in_examples, "pyright errors in examples/:\n" + "\n".join(in_examples)
    unresolved = [d["message"] for d in diagnostics if "could not be resolved" in d["message"]]
    assert not unresolved, f"{len(unresolved)} unresolved, e.g. {unresolved[:3]}"
    on_probe = [d["message"] for d in diagnostics if Path(d["file"]) == probe]
    assert on_probe == ['No parameter named "temprature"'], on_probe
