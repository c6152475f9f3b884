"""The scale-out recipes, shrunk to micro models, on 2 CPU processes (gloo) as CI can run them.

The same YAML files that name 8 GPUs run here with `--launch-config recipes/accelerate/cpu-2proc.yaml`
and `--set` overrides for size; what is checked is that every training stage really ran on two
ranks and that the chain reaches its last artifact.
"""
import csv
import os
import subprocess
import sys
from pathlib import Path


from shrinkbert.core.artifacts import read_manifest
from fixtures import tiny_sentences

ROOT = Path(__file__).resolve().parents[1]
CPU_2PROC = ROOT / "recipes" / "accelerate" / "cpu-2proc.yaml"


def run_recipe(recipe: str, out: Path, overrides: list[str], cache: Path) -> subprocess.CompletedProcess:
    from conftest import free_port

    launch = out.parent / CPU_2PROC.name  # the shipped config on a free port, not Accelerate's fixed 29500
    launch.write_text(CPU_2PROC.read_text() + f"main_process_port: {free_port()}\n")
    cmd = [sys.executable, "-m", "shrinkbert.cli", "run", str(ROOT / "recipes" / recipe), "--output-dir", str(out),
           "--launch-config", str(launch)]
    for assignment in overrides:
        cmd += ["--set", assignment]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SHRINKBERT_CACHE": str(cache),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_dry_run_names_the_launch_config(tmp_path):
    cmd = [sys.executable, "-m", "shrinkbert.cli", "run", str(ROOT / "recipes" / "bert-base-pretrain.yaml"),
           "--dry-run", "--output-dir", str(tmp_path / "dry")]
    shown = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "8gpu-ddp.yaml" in shown.stdout and "bert-base" in shown.stdout
    assert not (tmp_path / "dry" / "bert-base").exists()


def test_a_missing_launch_config_is_one_line(tmp_path):
    cmd = [sys.executable, "-m", "shrinkbert.cli", "run", str(ROOT / "recipes" / "bert-base-pretrain.yaml"),
           "--dry-run", "--launch-config", str(tmp_path / "nope.yaml")]
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error:") and "nope.yaml" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_bert_base_pretrain_recipe_shrunk_runs_on_two_cpu_processes(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(text for text, _ in tiny_sentences(400)) + "\n")
    out = tmp_path / "out"
    result = run_recipe("bert-base-pretrain.yaml", out, [
        f"tokenizer.corpus=[{corpus}]", "tokenizer.vocab_size=200",
        f"bert-base.corpus=[{corpus}]", "bert-base.preset=micro", "bert-base.max_steps=4", "bert-base.batch_size=4",
        "bert-base.grad_accum_steps=2", "bert-base.max_length=32", "bert-base.log_with=''",
        "bert-base.checkpoint_every=2", "bert-base.heldout_fraction=0.1", "bert-base.eval_batch_size=16",
    ], tmp_path / "cache")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    metrics = read_manifest(out / "bert-base")["metrics"]
    assert metrics["num_processes"] == 2
    assert metrics["steps"] == 4
    assert metrics["tokens_per_s"] > 0
    assert "heldout_nsp_accuracy_after" in metrics  # the recipe's NSP objective was on


def test_bert_base_sst2_recipe_shrunk_runs_on_two_cpu_processes(tiny_bert, tmp_path):
    data = tmp_path / "sst2.csv"  # GLUE's column names: the recipe relies on the 'sentence' default
    with data.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["idx", "sentence", "label"])
        for i, (text, label) in enumerate(tiny_sentences(96)):
            writer.writerow([i, text, label])
    out = tmp_path / "out"
    result = run_recipe("bert-base-sst2.yaml", out, [
        f"teacher.model={tiny_bert}", f"teacher.task={data}", "teacher.epochs=1", "teacher.batch_size=4",
        "teacher.log_with=''", "teacher.learning_rate=1.0e-3",
        "student.layers=1", "student.epochs=1", "student.batch_size=4",  # the task: inherited from the teacher
        "student-int8.max_eval_rows=16", "report.quick=true", "report.memory=off", "report.batch_sizes=[1]",
        "report.seq_lens=[\"real\"]", "report.timing=inprocess",
    ], tmp_path / "cache")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert read_manifest(out / "teacher")["metrics"]["num_processes"] == 2
    assert read_manifest(out / "student")["metrics"]["num_processes"] == 2
    assert (out / "report" / "report.json").is_file()
