"""The package and data contract: one namespace, a data spec inherited through the lineage, the
split seed apart from the training seed, the Python API, resume that refuses a changed run, and
runs that reproduce bit for bit in fresh processes."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fixtures import tiny_sentences

ROOT = Path(__file__).resolve().parents[1]
TINY_TRAIN = {"epochs": 1, "batch_size": 8, "max_length": 32, "checkpoint_every": 0, "log_every": 100}


@pytest.fixture(scope="module")
def body_csv(tmp_path_factory) -> Path:
    """A user's file with its own column names: body (text) and category (label names)."""
    path = tmp_path_factory.mktemp("user") / "reviews.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "body", "category"])
        for i, (text, label) in enumerate(tiny_sentences(80, seed=7)):
            writer.writerow([i, text, "pos" if label else "neg"])
    return path


def _spy_training_rows(monkeypatch, module) -> list:
    """Record the input_ids of every training set that `module`'s training loop is given."""
    seen = []
    real = module.train

    def spy(model, train_dataset, *args, **kwargs):
        seen.append([tuple(ids) for ids in train_dataset["input_ids"]])
        return real(model, train_dataset, *args, **kwargs)

    monkeypatch.setattr(module, "train", spy)
    return seen


def test_another_training_seed_trains_on_the_same_rows_and_never_a_test_row(tiny_bert, body_csv, cache_env, tmp_path,
                                                                             monkeypatch):
    import shrinkbert.core.train as core_train
    from shrinkbert import distill, finetune
    from shrinkbert.core.data.load import tokenize_task
    from shrinkbert.core.data.dataspec import DataSpec, load_splits
    from shrinkbert.core.models import load_tokenizer

    teacher_rows = _spy_training_rows(monkeypatch, core_train)
    teacher = finetune(model=tiny_bert, task=body_csv, text_column="body", label_column="category", seed=0,
                       output_dir=tmp_path / "teacher", **TINY_TRAIN)
    student_rows = _spy_training_rows(monkeypatch, core_train)  # each objective calls core.train's loop
    student = distill(teacher=teacher, layers=1, seed=1, output_dir=tmp_path / "student", **TINY_TRAIN)

    # the student named no task: it inherited the teacher's, columns and split seed included
    assert student.data["task"] == teacher.data["task"] == str(body_csv.resolve())
    assert student.data["text_column"] == "body" and student.data["label_column"] == "category"
    assert student.data["split_seed"] == teacher.data["split_seed"] == 0
    assert len(list((cache_env / "tasks").iterdir())) == 1, "a second training seed made a second split"

    spec = DataSpec(**{k: teacher.data[k] for k in ("task", "text_column", "text_pair_column", "label_column",
                                                  "split_seed")})
    task, splits = load_splits(spec)
    tokenized = tokenize_task(splits, load_tokenizer(teacher.path), task, 32)
    train_ids = {tuple(ids) for ids in tokenized["train"]["input_ids"]}
    held_out = {tuple(ids) for name in ("validation", "test") for ids in tokenized[name]["input_ids"]}
    assert set(teacher_rows[0]) == set(student_rows[0]) == train_ids
    assert not (set(student_rows[0]) & held_out)


def test_custom_columns_through_every_stage_from_the_cli_with_no_task_after_finetune(tiny_bert, body_csv, cache_env,
                                                                                      tmp_path):
    from shrinkbert.cli import main

    out = tmp_path / "runs"  # cache_env: SHRINKBERT_CACHE is the test's own
    steps = [
        ["finetune", "--model", str(tiny_bert), "--task", str(body_csv), "--text-column", "body",
         "--label-column", "category", "--epochs", "1", "--batch-size", "8", "--max-length", "32",
         "--output-dir", str(out / "teacher")],
        ["distill", "--teacher", str(out / "teacher"), "--layers", "1", "--epochs", "1", "--batch-size", "8",
         "--max-length", "32", "--output-dir", str(out / "student")],
        ["prune", "--model", str(out / "student"), "--head-fraction", "0.25", "--neuron-fraction", "0.25",
         "--importance-rows", "16", "--max-eval-rows", "16", "--max-length", "32", "--output-dir", str(out / "pruned")],
        ["export", "--model", str(out / "pruned"), "--parity-rows", "8", "--max-length", "32",
         "--output-dir", str(out / "onnx")],
        ["quantize", "--model", str(out / "onnx"), "--max-eval-rows", "16", "--max-length", "32",
         "--output-dir", str(out / "int8")],
        ["bundle", "--model", str(out / "int8"), "--parity-rows", "8", "--max-length", "32",
         "--output-dir", str(out / "bundle")],
        ["eval", str(out / "teacher"), str(out / "int8"), str(out / "bundle"), "--quick", "--memory", "off",
         "--batch-sizes", "1", "--seq-lens", "16", "--runs", "2", "--no-progress", "--no-plot",
         "--output-dir", str(out / "report")],
    ]
    for argv in steps:  # the command line's own entry point, in this process (a process each cost 25 s)
        assert main(argv) == 0, argv[0]
    for stage in ("student", "pruned", "onnx", "int8", "bundle"):
        data = json.loads((out / stage / "shrinkbert.json").read_text())["data"]
        assert data["task"] == str(body_csv.resolve()) and data["text_column"] == "body", stage
        assert data["label_names"] == ["neg", "pos"], stage
    from shrinkbert import Artifact
    from shrinkbert.compress.edge_predictor import Predictor

    predictor = Artifact(str(out / "bundle")).load()  # a plain string, as docs/qa.md writes it
    assert isinstance(predictor, Predictor) and predictor.predict(["a fine film"])[0]["label"] in ("neg", "pos")
    report = json.loads((out / "report" / "report.json").read_text())
    assert report["test_rows"]["n"] == 8 and "reviews" in report["test_rows"]["source"]
    assert all(v["metrics"].get("accuracy") is not None for v in report["variants"])


def test_python_api_returns_artifacts_and_takes_in_memory_models_and_datasets(tiny_bert, cache_env, tmp_path):
    import datasets
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from shrinkbert import Artifact, distill, export, quantize, report

    rows = tiny_sentences(80, seed=11)
    dataset = datasets.Dataset.from_dict({"body": [t for t, _ in rows],
                                          "category": ["pos" if y else "neg" for _, y in rows]})
    teacher = AutoModelForSequenceClassification.from_pretrained(tiny_bert)
    teacher.config.id2label, teacher.config.label2id = {0: "neg", 1: "pos"}, {"neg": 0, "pos": 1}
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    student = distill(teacher=teacher, tokenizer=tokenizer, dataset=dataset, text_column="body",
                      label_column="category", layers=1, output_dir=tmp_path / "student", **TINY_TRAIN)
    assert isinstance(student, Artifact) and student.stage == "distill"
    assert 0.0 <= student.metrics["test_accuracy"] <= 1.0
    assert type(student.load()).__name__ == "BertForSequenceClassification"
    int8 = quantize(model=export(model=student, output_dir=tmp_path / "onnx", max_length=32),
                    output_dir=tmp_path / "int8", max_eval_rows=8, max_length=32)
    assert type(int8.load()).__name__ == "ORTModelForSequenceClassification"
    assert int8.data["task"] == student.data["task"] and int8.data["label_names"] == ["neg", "pos"]
    assert int8.data["text_column"] == "body" and int8.data["label_column"] == "category"
    table = report(student, int8, output_dir=tmp_path / "report", quick=True, memory="off", batch_sizes=[1],
                   seq_lens=["16"], runs=2, progress=False, plot=False)
    assert [v["name"] for v in table["variants"]] == ["student", "int8"]


def test_resume_refuses_a_run_whose_stage_config_changed(tiny_bert, tiny_csv, cache_env, tmp_path, monkeypatch):
    from shrinkbert import distill, finetune
    from shrinkbert.core.errors import ShrinkbertError

    teacher = finetune(model=tiny_bert, task=tiny_csv, output_dir=tmp_path / "teacher", **TINY_TRAIN)
    settings = {**TINY_TRAIN, "checkpoint_every": 2, "layers": 1, "output_dir": tmp_path / "student"}

    def killed_before_writing(*args, **kwargs):
        raise KeyboardInterrupt  # the run dies after training, leaving its last checkpoint behind

    monkeypatch.setattr("shrinkbert.core.train.remove_checkpoints", killed_before_writing)
    monkeypatch.setattr("shrinkbert.core.artifacts.atomic_artifact", killed_before_writing)
    with pytest.raises(KeyboardInterrupt):
        distill(teacher=teacher, temperature=2.0, **settings)
    monkeypatch.undo()
    with pytest.raises(ShrinkbertError, match="temperature"):
        distill(teacher=teacher, temperature=4.0, **settings)
    fresh = distill(teacher=teacher, temperature=4.0, resume=False, **settings)  # resume=false starts afresh
    assert fresh.manifest["config"]["temperature"] == 4.0


def test_the_wheel_installs_one_namespace_and_runs_outside_the_repository(tmp_path):
    """Build the wheel from the tracked files, install it into a fresh venv, import and run it elsewhere."""
    import sysconfig

    source = tmp_path / "src"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True, timeout=60).stdout.split()
    for name in files:
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes((ROOT / name).read_bytes())
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=240)
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("shrinkbert-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"shrinkbert", wheel.name.split("-py3")[0] + ".dist-info"}
    assert "shrinkbert/core/metrics/accuracy/accuracy.py" in names
    assert "shrinkbert/compress/edge_predictor.py" in names
    assert "shrinkbert/py.typed" in names and "shrinkbert/functions.py" in names
    assert "shrinkbert/recipes/demo.yaml" in names and "shrinkbert/recipes/accelerate/cpu-2proc.yaml" in names

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True, timeout=60).stdout.strip())
    # The dependencies come from this environment's site-packages, added as a plain path (its .pth
    # files, this checkout's editable hook among them, are not processed); shrinkbert from the wheel.
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site),
                                str(wheel)], capture_output=True, text=True, timeout=240)
    assert installed.returncode == 0, installed.stderr[-2000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    probe = ("import importlib.util, shrinkbert, shrinkbert.core.data, shrinkbert.eval.harness\n"
             "from shrinkbert import finetune, distill, prune, export, quantize, bundle, report\n"
             f"assert shrinkbert.__file__.startswith({str(site)!r}), shrinkbert.__file__\n"
             "assert all(importlib.util.find_spec(n) is None for n in ('core', 'eval', 'teachers', 'students', 'compress'))\n"
             "from shrinkbert.recipe import find_recipe, load_recipe\n"
             f"assert str(find_recipe('demo')).startswith({str(site)!r}) and load_recipe('demo').stages\n"
             "from shrinkbert.cli import main; raise SystemExit(main(['--help']))\n")
    done = subprocess.run([str(python), "-c", probe], cwd=elsewhere, capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "commands:" in done.stdout and "distill" in done.stdout
