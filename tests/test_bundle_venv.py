"""The edge bundle needs only what its requirements.txt names: installed into a bare venv (no system
site packages, so no torch, transformers or shrinkbert), its predict.py gives the same predictions as
it does beside the kit. pip takes the wheels from its cache, else from the registry (scripts/setup.sh
installs with uv, whose cache pip does not read)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fixtures import make_tiny_bert, write_tiny_csv

TEXTS = "a warm and clever film\nthe plot was dull and tedious\nfine\n"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("venv-bundle")
    tiny, data = make_tiny_bert(where / "tiny"), write_tiny_csv(where / "data.csv", n=64)
    recipe = {"name": "venv", "seed": 0, "stages": {
        "teacher": {"uses": "finetune", "with": {"model": str(tiny), "task": str(data), "epochs": 1, "batch_size": 8,
                                                 "checkpoint_every": 0, "max_length": 32}},
        "onnx": {"uses": "export", "with": {"model": "${teacher}", "parity_rows": 8}},
        "int8": {"uses": "quantize", "with": {"model": "${onnx}", "max_eval_rows": 16}},
        "bundle": {"uses": "bundle", "with": {"model": "${int8}", "parity_rows": 8}}}}
    (where / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    done = subprocess.run([sys.executable, "-m", "shrinkbert.cli", "run", str(where / "recipe.yaml"), "--output-dir",
                           str(where / "out")], cwd=where, capture_output=True, text=True, timeout=240,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return where / "out" / "bundle"


def predict(python: str, bundle: Path, cwd: Path) -> list[dict]:
    done = subprocess.run([python, str(bundle / "predict.py"), "--json"], input=TEXTS, cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def test_the_bundle_installs_into_a_bare_venv_and_predicts_as_beside_the_kit(bundle, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                          "-r", str(bundle / "requirements.txt")], capture_output=True, text=True, timeout=280)
    if pip.returncode != 0 and not os.environ.get("CI"):
        pytest.skip(f"pip could not install the bundle's requirements here: {pip.stderr.strip().splitlines()[-1:]}")
    assert pip.returncode == 0, pip.stderr[-3000:]
    installed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
                               capture_output=True, text=True, timeout=60).stdout.lower()
    names = {line.split("==")[0] for line in installed.splitlines()}
    assert {"onnxruntime", "tokenizers", "numpy"} <= names
    assert not names & {"torch", "transformers", "optimum", "shrinkbert"}, names
    bare = predict(str(venv / "bin" / "python"), bundle, tmp_path)  # cwd outside the repository
    beside = predict(sys.executable, bundle, tmp_path)
    assert len(bare) == 3 and bare == beside
