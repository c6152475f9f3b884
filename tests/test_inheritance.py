"""The data spec is named once and inherited by every later stage, shown with values that differ from
every default: a pair task from a user file whose columns are not text/text_pair/label, split seed 7,
all given to the first stage only, then distill, prune, export, quantize, bundle and eval inherit them
(through `shrinkbert run`, i.e. the CLI's config path)."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fixtures import tiny_sentences

ROOT = Path(__file__).resolve().parents[1]
OWN = {"text_column": "premise", "text_pair_column": "hypothesis", "label_column": "verdict", "split_seed": 7}
SMALL = {"batch_size": 8, "checkpoint_every": 0, "epochs": 1}


@pytest.fixture(scope="module")
def pair_csv(tmp_path_factory) -> Path:
    """A pair task: does the hypothesis carry the premise's sentiment? Labels are names, not 0/1."""
    path = tmp_path_factory.mktemp("pairs") / "pairs.csv"
    firsts, seconds = tiny_sentences(80, seed=3), tiny_sentences(80, seed=4)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "premise", "hypothesis", "verdict"])
        for i, ((a, la), (b, lb)) in enumerate(zip(firsts, seconds)):
            writer.writerow([i, a, b, "same" if la == lb else "different"])
    return path


def chain(pair_csv: Path, max_length: int | None) -> dict:
    teacher = {"model": "", "task": str(pair_csv), **OWN, **SMALL}
    if max_length:
        teacher["max_length"] = max_length
    return {"name": "inherit", "seed": 0, "stages": {
        "teacher": {"uses": "finetune", "with": teacher},
        "student": {"uses": "distill", "with": {"teacher": "${teacher}", "layers": 1, **SMALL}},
        "pruned": {"uses": "prune", "with": {"model": "${student}", "head_fraction": 0.25, "neuron_fraction": 0.25,
                                             "importance_rows": 16, "max_eval_rows": 16}},
        "onnx": {"uses": "export", "with": {"model": "${pruned}", "parity_rows": 8}},
        "int8": {"uses": "quantize", "with": {"model": "${onnx}", "max_eval_rows": 16}},
        "bundle": {"uses": "bundle", "with": {"model": "${int8}", "parity_rows": 8}},
        "report": {"uses": "eval", "with": {"artifacts": ["${teacher}", "${int8}", "${bundle}"], "quick": True,
                                            "memory": "off", "timing": "inprocess", "batch_sizes": [1],
                                            "seq_lens": ["16"], "runs": 2,
                                            "progress": False, "plot": False}},
    }}


def run_chain(tmp_path: Path, tiny_bert: Path, pair_csv: Path, max_length: int | None = None,
              stages: tuple[str, ...] = ()) -> Path:
    recipe = chain(pair_csv, max_length)
    if stages:
        recipe["stages"] = {k: v for k, v in recipe["stages"].items() if k in stages}
    recipe["stages"]["teacher"]["with"]["model"] = str(tiny_bert)
    path = tmp_path / "inherit.yaml"
    path.write_text(yaml.safe_dump(recipe))
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "shrinkbert.cli", "run", str(path), "--output-dir", str(out)],
                          cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return out


def test_a_pair_task_its_columns_and_split_seed_7_are_inherited_by_every_stage(tiny_bert, pair_csv, tmp_path):
    out = run_chain(tmp_path, tiny_bert, pair_csv)
    teacher_rows = None
    for stage in ("teacher", "student", "pruned", "onnx", "int8", "bundle"):
        manifest = json.loads((out / stage / "shrinkbert.json").read_text())
        data = manifest["data"]
        assert data["task"] == str(pair_csv.resolve()), stage
        assert {k: data[k] for k in OWN} == OWN, stage
        assert data["label_names"] == ["different", "same"], stage
        if stage == "teacher":
            teacher_rows = data["rows"]
    assert teacher_rows and teacher_rows["train"] > 0
    # split seed 7 is a different split from the default 0: the stored task under seed7 is what every
    # stage read, and the report measured its test rows
    report = json.loads((out / "report" / "report.json").read_text())
    assert report["test_rows"]["n"] == 8 and "pairs" in report["test_rows"]["source"]
    assert all(v["metrics"].get("accuracy") is not None and not v["error"] for v in report["variants"])


def test_max_length_given_once_is_inherited(tiny_bert, pair_csv, tmp_path):
    # 24 is given to the teacher only; every later stage must keep it (the kind's default is 128)
    out = run_chain(tmp_path, tiny_bert, pair_csv, max_length=24,
                    stages=("teacher", "student", "pruned", "onnx", "int8", "bundle"))
    for stage in ("teacher", "student", "pruned", "onnx", "int8", "bundle"):
        manifest = json.loads((out / stage / "shrinkbert.json").read_text())
        assert manifest["resolved"]["max_length"] == 24, stage
        # the config records what was given: the teacher's flag, nothing after it
        assert manifest["config"]["max_length"] == (24 if stage == "teacher" else None), stage
    assert json.loads((out / "bundle" / "labels.json").read_text())["max_length"] == 24


def test_a_stage_resolves_max_length_into_a_copy_and_leaves_the_given_config_alone(tmp_path):
    from shrinkbert.compress.configs import ExportConfig
    from shrinkbert.core.data.dataspec import length_records, resolve_max_length
    from shrinkbert.core.kinds import get_kind

    given = ExportConfig(model=str(tmp_path), output_dir=str(tmp_path / "out"))
    resolved, asked = resolve_max_length(given, get_kind("sequence"), [])
    assert given.max_length is None and asked is None and resolved.max_length == 128 and resolved is not given
    records = length_records(resolved, asked)
    assert records["config"]["max_length"] is None and records["resolved"] == {"max_length": 128}


def test_max_length_is_not_inherited_across_tasks_or_from_a_model_without_one(tmp_path):
    from shrinkbert.core.artifacts import write_manifest
    from shrinkbert.core.data.dataspec import inherited_max_length

    pretrained, teacher = tmp_path / "mlm", tmp_path / "teacher"
    for path, data in ((pretrained, {}), (teacher, {"task": "movie-snippets"})):
        path.mkdir()
        write_manifest(path, stage="x", config={"max_length": 64}, data=data)
    assert inherited_max_length([pretrained], "") is None  # an MLM corpus's length is no task's
    assert inherited_max_length([teacher], "") == 64
    assert inherited_max_length([teacher], "movie-snippets") == 64
    assert inherited_max_length([teacher], "sst2") is None
