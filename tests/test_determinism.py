"""Every stage makes the same bytes twice: each artifact's content hash (weights, graphs, vocabulary,
configs, bundle files; the manifest, which records timings and dates, excluded: core/artifacts.py
`artifact_hash`) is equal across two fresh `shrinkbert run` processes, at one thread and at two.

The chains: a sequence task through continued MLM pretraining (its new head must be seeded),
finetune, distill, prune, trim-vocab, export, dynamic and static int8 and bundle; a token task through finetune and distill. (Pretrain, finetune and distill resuming
bit-exactly after SIGKILL: tests/test_train.py.)
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fixtures import tiny_sentences, write_tiny_conll, write_tiny_csv
from shrinkbert.core.artifacts import artifact_hash, read_manifest

ROOT = Path(__file__).resolve().parents[1]
SMALL = {"batch_size": 8, "checkpoint_every": 0, "epochs": 1, "max_length": 32}


def sequence_chain(data: Path, corpus: Path, tiny: Path) -> dict:
    return {"name": "same-bytes", "seed": 0, "stages": {
        "mlm": {"uses": "pretrain", "with": {"model": str(tiny), "corpus": [str(corpus)], "max_steps": 4,
                                              "batch_size": 4, "max_length": 32, "head_warmup_steps": 2,
                                              "checkpoint_every": 0}},
        "teacher": {"uses": "finetune", "with": {"model": "${mlm}", "task": str(data), **SMALL}},
        "student": {"uses": "distill", "with": {"teacher": "${teacher}", "layers": 1, "hidden_weight": 1.0, **SMALL}},
        "pruned": {"uses": "prune", "with": {"model": "${student}", "head_fraction": 0.25, "neuron_fraction": 0.25,
                                             "importance_rows": 16, "max_eval_rows": 16}},
        "trimmed": {"uses": "trim-vocab", "with": {"model": "${pruned}", "max_unseen_unk_rate": 1.0,
                                                   "max_unseen_token_increase": 10.0}},
        "onnx": {"uses": "export", "with": {"model": "${trimmed}", "parity_rows": 8, "optimization": "none"}},
        "int8": {"uses": "quantize", "with": {"model": "${onnx}", "max_eval_rows": 16}},
        "int8-static": {"uses": "quantize", "with": {"model": "${onnx}", "approach": "static", "calibration_rows": 32,
                                                     "min_calibration_rows": 16, "max_eval_rows": 16}},
        # spin and threads set: "auto" times the bundle, and a measured choice may differ between two builds
        "bundle": {"uses": "bundle", "with": {"model": "${int8}", "parity_rows": 8, "spin": "on",
                                              "threads": "default"}},
    }}


def token_chain(data: Path, tiny: Path) -> dict:
    return {"name": "same-bytes-token", "seed": 0, "stages": {
        "teacher": {"uses": "finetune", "with": {"model": str(tiny), "task": str(data), **SMALL}},
        "student": {"uses": "distill", "with": {"teacher": "${teacher}", "layers": 1, **SMALL}},
    }}


def run_twice(recipe: dict, where: Path, threads: int) -> list[dict[str, str]]:
    """The stages' content hashes of two fresh runs of `recipe` with `threads` threads."""
    path = where / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    hashes = []
    for attempt in ("a", "b"):
        out = where / f"{attempt}-{threads}"
        done = subprocess.run([sys.executable, "-m", "shrinkbert.cli", "run", str(path), "--output-dir", str(out)],
                              cwd=where, capture_output=True, text=True, timeout=240,
                              env={**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
                                   "SHRINKBERT_CACHE": str(where / f"cache-{attempt}-{threads}")})
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        hashes.append({stage: artifact_hash(out / stage) for stage in recipe["stages"]})
        for stage in recipe["stages"]:  # the manifest's own record of the hash is the content's
            assert read_manifest(out / stage)["hash"] == hashes[-1][stage], stage
    return hashes


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    from fixtures import make_tiny_bert

    where = tmp_path_factory.mktemp("same-bytes")
    corpus = where / "corpus.txt"
    corpus.write_text("\n".join(text for text, _ in tiny_sentences(120, seed=5)) + "\n")
    return {"sequence": make_tiny_bert(where / "seq"), "token": make_tiny_bert(where / "tok", token=True,
                                                                               num_labels=5),
            "csv": write_tiny_csv(where / "data.csv", n=96), "conll": write_tiny_conll(where / "data.conll", n=64),
            "corpus": corpus}


# One thread count each (together: both), as two runs of each chain in fresh processes are the cost.
@pytest.mark.parametrize("threads", [2])
def test_every_sequence_stage_makes_the_same_bytes_in_a_fresh_process(tiny, tmp_path, threads):
    first, second = run_twice(sequence_chain(tiny["csv"], tiny["corpus"], tiny["sequence"]), tmp_path, threads)
    differ = [stage for stage in first if first[stage] != second[stage]]
    assert not differ, f"{threads} thread(s): these stages made other bytes the second time: {differ}"


@pytest.mark.parametrize("threads", [1])
def test_a_token_tasks_finetune_and_distill_make_the_same_bytes(tiny, tmp_path, threads):
    first, second = run_twice(token_chain(tiny["conll"], tiny["token"]), tmp_path, threads)
    assert first == second, f"{threads} thread(s)"
