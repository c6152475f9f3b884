"""A full disk is one `error:` line and no artifact, for every stage that writes one.

Each stage writes into a 4 KB tmpfs (too small for any model or report), run through the `shrinkbert`
command line in this process. Where this machine cannot mount one (no root), the same failure is made
by a writer that raises ENOSPC (`os.replace`, the atomic writes' last step, and safetensors' writer).
Errors that are bugs stay tracebacks: tests/test_safety.py and the stages' own tests cover those.
"""
from __future__ import annotations

import errno
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from fixtures import make_tiny_bert, tiny_sentences, write_tiny_csv
from shrinkbert.cli import main
from shrinkbert.core.errors import environment_error


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("full-disk")
    model = make_tiny_bert(root / "model")
    data = write_tiny_csv(root / "data.csv", n=48)
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(text for text, _ in tiny_sentences(200, seed=5)) + "\n")
    onnx = root / "onnx"
    assert main(["export", "--model", str(model), "--task", str(data), "--max-length", "32", "--parity-rows", "4",
                 "--optimization", "none", "--cache-dir", str(root / "cache"), "--output-dir", str(onnx)]) == 0
    embedder = root / "embedder"  # an embedding student: the embedding kind's own export, quantize and bundle
    embed = ["--teacher", str(model), "--corpus", str(corpus), "--epochs", "1", "--batch-size", "16",
             "--cache-dir", str(root / "cache")]
    assert main(["distill", "--objective", "vectors", *embed, "--layers", "1", "--output-dir", str(embedder)]) == 0
    embedder_onnx = root / "embedder-onnx"
    assert main(["export", "--model", str(embedder), "--output-dir", str(embedder_onnx)]) == 0
    pairs = root / "pairs"  # scored pairs (STS-B's shape): the embedding kind's finetune and eval
    pairs.mkdir()
    texts = [text.replace(",", "") for text, _ in tiny_sentences(13, seed=6)]
    for split in ("train", "validation", "test"):
        rows = ["sentence1,sentence2,score"] + [f"{texts[k]},{texts[k + 1]},{k % 6}" for k in range(12)]
        (pairs / f"{split}.csv").write_text("\n".join(rows) + "\n")
    return {"model": model, "data": data, "onnx": onnx, "root": root, "corpus": corpus, "embed": embed, "pairs": pairs,
            "embedder": embedder, "embedder_onnx": embedder_onnx}


@pytest.fixture
def full_disk(tmp_path, monkeypatch):
    """A folder on a filesystem with no room: a 4 KB tmpfs, or ENOSPC from the writers."""
    where = Path("/tmp") / f"shrinkbert-full-{uuid.uuid4().hex[:8]}"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(where)],
                             capture_output=True, timeout=30).returncode == 0
    if not mounted:
        import safetensors.torch

        def no_space(*args, **kwargs):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(args[-1]) if args else None)

        monkeypatch.setattr(os, "replace", no_space)
        monkeypatch.setattr(safetensors.torch, "save_file", no_space)
    yield where
    if mounted:
        subprocess.run(["umount", str(where)], capture_output=True, timeout=30)
    where.rmdir() if not any(where.iterdir()) else None


def _stages(i: dict, out: Path) -> dict[str, list[str]]:
    data = ["--task", str(i["data"]), "--max-length", "32", "--cache-dir", str(i["root"] / "cache")]
    return {
        "tokenizer": ["tokenizer", "--corpus", str(i["corpus"]), "--vocab-size", "200"],
        "pretrain": ["pretrain", "--tokenizer", str(i["model"]), "--preset", "micro", "--corpus", str(i["corpus"]),
                     "--max-length", "32", "--max-steps", "2", "--cache-dir", str(i["root"] / "cache")],
        "finetune": ["finetune", "--model", str(i["model"]), *data, "--epochs", "1", "--batch-size", "8"],
        "distill": ["distill", "--teacher", str(i["model"]), *data, "--layers", "1", "--epochs", "1",
                    "--batch-size", "8"],
        "prune": ["prune", "--model", str(i["model"]), *data, "--head-fraction", "0.5", "--importance-rows", "8",
                  "--max-eval-rows", "8"],
        "sparsify": ["sparsify", "--model", str(i["model"]), *data, "--sparsity", "0.5"],
        "trim-vocab": ["trim-vocab", "--model", str(i["model"]), "--task", str(i["data"]),
                       "--cache-dir", str(i["root"] / "cache")],
        "export": ["export", "--model", str(i["model"]), *data, "--parity-rows", "4"],
        "quantize": ["quantize", "--model", str(i["onnx"]), *data, "--max-eval-rows", "8"],
        "bundle": ["bundle", "--model", str(i["onnx"]), *data, "--parity-rows", "4", "--spin", "on"],
        "eval": ["eval", str(i["model"]), str(i["onnx"]), *data, "--quick", "--memory", "off", "--batch-sizes", "1",
                 "--seq-lens", "16", "--runs", "2", "--no-progress", "--no-plot"],
        "frontier": ["frontier", "--teacher", str(i["model"]), *data, "--speedups", "", "--shapes", "1L/H32",
                     "--seeds", "1", "--max-steps", "2", "--batch-size", "8", "--threads", "1", "--runs", "2",
                     "--warmup", "0"],
        "distill-embeddings": ["distill", "--objective", "vectors", *i["embed"], "--layers", "1"],
        "distill-static": ["distill", *i["embed"], "--student", "static", "--dim", "8"],
        "finetune-embeddings": ["finetune", "--model", str(i["embedder"]), "--task", str(i["pairs"]), "--epochs", "1",
                                "--batch-size", "4"],
        "eval-embeddings": ["eval", str(i["embedder"]), str(i["embedder_onnx"]), "--task", str(i["pairs"]), "--quick"],
        "export-embeddings": ["export", "--model", str(i["embedder"])],
        "quantize-embeddings": ["quantize", "--model", str(i["embedder_onnx"])],
        "bundle-embeddings": ["bundle", "--model", str(i["embedder_onnx"])],
    }


@pytest.mark.parametrize("stage", ["tokenizer", "pretrain", "finetune", "distill", "prune", "sparsify", "trim-vocab", "export", "quantize",
                                   "bundle", "eval", "frontier", "distill-embeddings", "distill-static", "finetune-embeddings",
                                   "eval-embeddings", "export-embeddings",
                                   "quantize-embeddings", "bundle-embeddings"])
def test_a_full_disk_is_one_line_and_no_artifact(stage, inputs, full_disk, capsys):
    out = full_disk / "out"
    code = main(_stages(inputs, out)[stage] + ["--output-dir", str(out)])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert code == 2 and "Traceback" not in err, err[-2000:]
    assert len(errors) == 1 and "No space left on device" in errors[0], err[-2000:]
    assert not (out / "shrinkbert.json").exists() and not (out / "report.md").exists()
    # what may stay is whole: a resumable record (eval's measurement cache, frontier's teacher probe)
    left = [p for p in out.rglob("*") if p.is_file()] if out.exists() else []
    assert not [p for p in left if ".tmp" in p.name or ".partial" in str(p)], left
    assert all(json.loads(p.read_text()) for p in left if p.suffix == ".json"), left


def test_only_the_machines_refusals_become_one_line():
    assert environment_error(OSError(errno.ENOSPC, "No space left on device", "/x/model.onnx")).startswith(
        "No space left on device: /x/model.onnx")
    wrapped = RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)")
    assert environment_error(wrapped).startswith("No space left on device")
    try:
        try:
            raise PermissionError(errno.EACCES, "Permission denied", "/ro/out")
        except PermissionError as inner:
            raise ValueError("could not save") from inner
    except ValueError as outer:
        assert environment_error(outer).startswith("Permission denied: /ro/out")
    import shutil
    copied = shutil.Error([("a/tokenizer.json", "b/tokenizer.json", "[Errno 28] No space left on device: 'a' -> 'b'")])
    assert environment_error(copied).startswith("No space left on device")  # copytree's gathered failures
    assert environment_error(FileNotFoundError(errno.ENOENT, "No such file", "x")) is None  # a bug or a typo
    assert environment_error(KeyError("input_ids")) is None
