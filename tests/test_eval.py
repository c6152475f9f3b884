"""The eval room: offline metrics, runners per artifact kind, interleaved latency, report, cache."""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from shrinkbert.core.data.tasks import Task
from fixtures import tiny_sentences

ROOT = Path(__file__).resolve().parents[1]
TASK = Task("tiny", ("negative", "positive"), metrics=("accuracy", "f1", "matthews_correlation"))
FAST = dict(batch_sizes=[1, 2], seq_lens=["16", "real"], runs=5, warmup=1, threads=1, progress=False,
            memory="inprocess")


@pytest.fixture(scope="module")
def rows():
    from shrinkbert.eval.rows import from_lists

    data = tiny_sentences(24, seed=3)
    return from_lists(TASK, [t for t, _ in data], [y for _, y in data], source="tiny_sentences(24)")


@pytest.fixture(scope="module")
def onnx_dir(tiny_bert, tmp_path_factory) -> Path:
    """The tiny BERT exported by the export stage itself, so the harness reads what compress writes."""
    from shrinkbert.compress import export

    out = tmp_path_factory.mktemp("onnx") / "tiny-onnx"
    return Path(export.run(export.Config(model=str(tiny_bert), output_dir=str(out), parity_rows=8, max_length=32)))


@pytest.fixture(scope="module")
def bundle_dir(onnx_dir, tiny_bert, tmp_path_factory) -> Path:
    """A bundle written by the bundle stage, checked against a reference whose labels are all flipped
    (its classifier negated): the agreement check fails, is allowed, and the report must flag it."""
    from shrinkbert.compress import bundle
    from fixtures import flipped_copy

    flipped = flipped_copy(tiny_bert, tmp_path_factory.mktemp("flipped") / "flipped")
    out = tmp_path_factory.mktemp("bundle") / "tiny-bundle"
    return Path(bundle.run(bundle.Config(model=str(onnx_dir), output_dir=str(out), reference=str(flipped),
                                         allow_parity_failure=True, parity_rows=16, max_length=32)))


@pytest.fixture(scope="module")
def broken(tiny_bert, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("broken")
    corrupt = root / "corrupt-weights"
    shutil.copytree(tiny_bert, corrupt)
    (corrupt / "model.safetensors").write_bytes(b"not a safetensors file")
    bad_graph = root / "bad-graph"
    bad_graph.mkdir()
    (bad_graph / "model.onnx").write_bytes(b"\x00garbage")
    return {"missing": root / "does-not-exist", "corrupt": corrupt, "bad_graph": bad_graph}


def _config(paths, out, **overrides):
    from shrinkbert.eval.harness import EvalConfig

    values = {**FAST, **overrides}
    return EvalConfig(artifacts=[str(p) for p in paths], task="tiny", output_dir=str(out), **values)


@pytest.fixture(scope="module")
def first_run(tiny_bert, onnx_dir, bundle_dir, broken, rows, tmp_path_factory):
    from shrinkbert.eval.harness import run

    out = tmp_path_factory.mktemp("eval-out")
    paths = [tiny_bert, onnx_dir, bundle_dir, broken["missing"], broken["corrupt"], broken["bad_graph"]]
    report, files = run(_config(paths, out), rows=rows)
    return {"report": report, "files": files, "out": out, "paths": paths,
            "by_name": {r["name"]: r for r in report["variants"]}}


# -- metrics ------------------------------------------------------------------------------------

def test_metric_modules_load_with_no_network(monkeypatch):
    import shrinkbert.core.metrics as metrics

    def no_network(*args, **kwargs):
        raise AssertionError("the network was touched")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    metrics._load.cache_clear()
    for name in ("accuracy", "f1", "matthews_correlation", "squad"):
        module = metrics.load_metric(name)
        assert module.name == name
    assert metrics.available() == ["accuracy", "f1", "matthews_correlation", "seqeval", "squad"]


def test_metric_modules_ship_as_package_data():
    import tomllib

    pattern = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["shrinkbert.core"]
    matched = sorted(p.relative_to(ROOT / "core").as_posix() for glob in pattern for p in (ROOT / "core").glob(glob))
    assert {"metrics/accuracy/accuracy.py", "metrics/f1/f1.py",
            "metrics/matthews_correlation/matthews_correlation.py"} <= set(matched)


def test_compute_metrics_equals_hand_count():
    from shrinkbert.core.errors import ShrinkbertError
    from shrinkbert.core.metrics import compute_metrics

    refs = [1, 1, 1, 1, 0, 0, 0, 0, 1, 0]
    preds = [1, 1, 1, 0, 0, 0, 1, 0, 1, 1]
    tp, tn, fp, fn = 4, 3, 2, 1  # counted by hand
    got = compute_metrics(["accuracy", "f1", "mcc"], preds, refs)
    assert got["accuracy"] == pytest.approx((tp + tn) / 10)
    assert got["f1"] == pytest.approx(2 * tp / (2 * tp + fp + fn))
    mcc = (tp * tn - fp * fn) / np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    assert got["matthews_correlation"] == pytest.approx(mcc)
    multi = compute_metrics(["f1"], [0, 1, 2, 2], [0, 1, 2, 1], num_labels=3)
    assert multi["f1"] == pytest.approx((1 + 2 / 3 + 2 / 3) / 3)  # macro over 3 labels
    with pytest.raises(ShrinkbertError, match="unknown metric"):
        compute_metrics(["bleu"], [0], [0])


# -- measuring ------------------------------------------------------------------------------------

def test_accuracy_equals_hand_count(first_run, tiny_bert, rows):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(tiny_bert).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    with torch.no_grad():
        logits = model(**tokenizer(rows.texts, padding=True, return_tensors="pt")).logits
    correct = sum(int(p) == y for p, y in zip(logits.argmax(-1).tolist(), rows.labels))
    measured = first_run["by_name"][tiny_bert.name]
    assert measured["error"] is None
    assert measured["metrics"]["accuracy"] == pytest.approx(correct / len(rows))
    assert measured["test_rows"] == len(rows)


def test_pytorch_onnx_and_bundle_agree(first_run, tiny_bert, onnx_dir, bundle_dir):
    by_name = first_run["by_name"]
    torch_row, onnx_row, bundle_row = by_name[tiny_bert.name], by_name[onnx_dir.name], by_name[bundle_dir.name]
    assert (torch_row["kind"], onnx_row["kind"], bundle_row["kind"]) == ("pytorch", "onnx", "bundle")
    assert onnx_row["metrics"] == pytest.approx(torch_row["metrics"])
    assert bundle_row["metrics"] == pytest.approx(torch_row["metrics"])
    assert onnx_row["agreement_with_baseline"] == 1.0
    assert bundle_row["agreement_with_baseline"] == 1.0


def test_latency_figures_are_sane(first_run):
    report = first_run["report"]
    assert report["settings"]["cases"] == ["b1/s16", "b2/s16", "b1/real", "b2/real"]
    measured = [r for r in report["variants"] if not r["error"]]
    assert len(measured) == 3
    for row in measured:
        assert set(row["latency_ms"]) == set(report["settings"]["cases"])
        for stats in row["latency_ms"].values():
            assert stats["min"] > 0
            assert stats["n"] == FAST["runs"]
            assert stats["throughput_per_s"] > 0
        assert row["size_bytes"] > 0 and row["num_parameters"] > 0
        assert row["ratios"]["speedup"] > 0 and row["ratios"]["size_ratio"] > 0
    assert report["settings"]["threads"] == 1


def test_bad_artifacts_get_an_error_and_the_others_are_measured(first_run, broken):
    by_name = first_run["by_name"]
    missing, corrupt, bad = (by_name[broken[k].name] for k in ("missing", "corrupt", "bad_graph"))
    assert "does not exist" in missing["error"]
    assert "safetensors" in corrupt["error"] and "\n" not in corrupt["error"]
    assert "ONNX" in bad["error"] and "\n" not in bad["error"]
    for row in (missing, corrupt, bad):
        assert row["flags"] == [f"error: {row['error']}"]
    assert sum(1 for r in first_run["report"]["variants"] if not r["error"]) == 3
    markdown = first_run["files"]["md"].read_text()
    assert missing["error"] in markdown and corrupt["error"] in markdown


def test_report_files_are_written(first_run, tiny_bert, onnx_dir, bundle_dir):
    files = first_run["files"]
    assert set(files) == {"json", "md", "csv", "latency_csv", "png"}
    report = json.loads(files["json"].read_text())
    assert report["baseline"] == tiny_bert.name
    assert report["headline_case"] == "b1/s16"
    bundle_row = next(r for r in report["variants"] if r["name"] == bundle_dir.name)
    assert bundle_row["lineage"] == "tiny-init → export → bundle"
    assert any("reference_agreement failed" in f for f in bundle_row["flags"])
    markdown = files["md"].read_text()
    assert "tiny-init → export → bundle" in markdown and "| b2/real |" in markdown
    summary = files["csv"].read_text().splitlines()
    assert summary[0].startswith("variant,kind,lineage,accuracy,f1,matthews_correlation,p50_ms@b1/s16")
    assert len(summary) == 1 + len(first_run["paths"])
    assert len(files["latency_csv"].read_text().splitlines()) == 1 + 3 * 4
    assert files["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and files["png"].stat().st_size > 10_000


def test_each_variant_is_set_against_its_floor(first_run, tiny_bert, onnx_dir, bundle_dir, broken):
    """The report holds each variant to the host's rate for the arithmetic it runs, on its own shape's
    multiply-adds (hand-counted here), and says p50 / floor per case."""
    from transformers import AutoConfig

    report, by = first_run["report"], first_run["by_name"]
    rates = report["floor_rates"]
    assert min(rates["int8"], rates["onnx_fp32"], rates["torch_fp32"]) > 0 and rates["threads"] == FAST["threads"]
    torch_row, onnx_row, bundle_row = by[tiny_bert.name], by[onnx_dir.name], by[bundle_dir.name]
    assert (torch_row["floor"]["rate"], onnx_row["floor"]["rate"]) == ("torch_fp32", "onnx_fp32")
    assert bundle_row["floor"]["rate"] == "onnx_fp32"  # its shape from its parent's config, its graph fp32
    config = AutoConfig.from_pretrained(tiny_bert)
    h, f, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    s = 16
    macs = layers * (s * (4 * h * h + 2 * h * f) + 2 * s * s * h)
    floor = onnx_row["floor"]["cases"]["b1/s16"]
    assert floor["macs"] == macs
    assert floor["floor_ms"] == pytest.approx(2 * macs / (rates["onnx_fp32"] * 1e9) * 1000)
    assert floor["p50_over_floor"] == pytest.approx(onnx_row["latency_ms"]["b1/s16"]["p50"] / floor["floor_ms"])
    assert onnx_row["floor"]["cases"]["b2/s16"]["macs"] == 2 * macs
    assert by[broken["corrupt"].name].get("floor") is None
    markdown = first_run["files"]["md"].read_text()
    assert "floor ms | p50 / floor |" in markdown and "- Floor: the host's rates" in markdown
    assert "floor_ms,p50_over_floor" in first_run["files"]["latency_csv"].read_text().splitlines()[0]


def test_multiply_adds_follow_the_shape_pruning_and_gated_ffn(tmp_path):
    from transformers import BertConfig, ModernBertConfig

    from shrinkbert.eval.floor import encoder_shape, graph_runs_int8, multiply_adds, product_graph

    # the demo's edge student: 2 layers at H384, cut to 6 of 12 heads and FFN 384: 164M at b1/s128
    cut = BertConfig(hidden_size=384, num_hidden_layers=2, num_attention_heads=12, intermediate_size=384,
                     pruned_heads={0: list(range(6)), 1: list(range(6, 12))})
    assert encoder_shape(cut).attention == (192, 192)
    assert multiply_adds(encoder_shape(cut), 1, 128) == 163_577_856
    gated = ModernBertConfig(hidden_size=64, num_hidden_layers=1, num_attention_heads=4, intermediate_size=96)
    assert multiply_adds(encoder_shape(gated), 1, 1) == 4 * 64 * 64 + 3 * 64 * 96 + 2 * 64
    assert graph_runs_int8(product_graph("MatMulInteger", 4, 8, 8, tmp_path / "int8.onnx"))
    assert not graph_runs_int8(product_graph("MatMul", 4, 8, 8, tmp_path / "fp32.onnx"))


def test_rerun_reuses_cached_measurements(first_run, rows, monkeypatch):
    import shrinkbert.eval.measure as measure
    from shrinkbert.eval.harness import run

    def must_not_load(*args, **kwargs):
        raise AssertionError("a cached variant was loaded again")

    def must_not_time(*args, **kwargs):
        raise AssertionError("the host's rates were timed again beside cached latencies")

    import shrinkbert.eval.floor as floor

    monkeypatch.setattr(measure, "open_runner", must_not_load)
    monkeypatch.setattr(floor, "host_rates", must_not_time)
    report, _ = run(_config(first_run["paths"], first_run["out"]), rows=rows)
    # static + accuracy + 4 latency cases per variant, and the host's rates of the same run
    assert report["cache"]["hits"] == 3 * (2 + 4) + 1
    assert report["floor_rates"] == first_run["report"]["floor_rates"]
    before = {r["name"]: r for r in first_run["report"]["variants"]}
    for row in report["variants"]:
        if not row["error"]:
            assert row["latency_ms"] == before[row["name"]]["latency_ms"]
            assert row["metrics"] == before[row["name"]]["metrics"]
    # Changed settings are measured anew, not served from the cache.
    changed, _ = run(_config(first_run["paths"][:1], first_run["out"], runs=6), rows=rows)
    assert "cached variant was loaded again" in changed["variants"][0]["error"]


def test_a_new_variant_retimes_the_cached_ones_too(tiny_bert, onnx_dir, rows, tmp_path):
    from shrinkbert.eval.harness import run

    alone, _ = run(_config([tiny_bert], tmp_path), rows=rows)
    joined, _ = run(_config([tiny_bert, onnx_dir], tmp_path), rows=rows)
    # static + accuracy of the first variant come from the cache; its latency is timed again,
    # interleaved with the newcomer, so every ratio comes from one run
    # a reused latency would count as a cache hit too (eval/measure.py); timings themselves may repeat
    assert joined["cache"]["hits"] == 2
    assert all(stats["n"] == FAST["runs"] for v in joined["variants"] for stats in v["latency_ms"].values())


# -- report logic -------------------------------------------------------------------------------

def _variant(name, path, p50, acc, size, manifest=None, content_hash=""):
    from shrinkbert.eval.lineage import lineage
    from shrinkbert.eval.measure import Variant

    v = Variant(name, path, kind="onnx", manifest=manifest or {}, content_hash=content_hash)
    v.static = {"size_bytes": size, "num_parameters": 10, "memory_bytes": 1}
    v.accuracy = {"metrics": {"accuracy": acc}, "n": 4, "predictions": [0, 1, 1, 0]}
    v.latency = {"b1/s16": {"p50": p50}}
    v.lineage = lineage(path, manifest) if manifest else {}
    return v


def test_ratios_and_flags(rows, tmp_path):
    from shrinkbert.eval.measure import Settings
    from shrinkbert.eval.report import build_report

    parent_manifest = {"stage": "export", "parents": []}
    child_manifest = {"stage": "sparsify", "parents": [{"path": "/x/parent", "hash": "h-parent", "stage": "export"}],
                      "metrics": {"parity": {"max_abs_logit_diff": 0.2, "tolerance": 1e-4, "passed": False}},
                      "checks": [{"name": "parity", "passed": False, "detail": "max |logit diff| 0.2"}]}
    variants = [_variant("teacher", "/x/teacher", 10.0, 0.90, 400), _variant("parent", "/x/parent", 2.0, 0.88, 100,
                parent_manifest, "h-parent"), _variant("child", "/x/child", 2.5, 0.87, 100, child_manifest, "h-child")]
    report = build_report(variants, rows, Settings(batch_sizes=[1], seq_lens=["16"], threads=1))
    child = report["variants"][2]
    assert child["lineage"] == "export → sparsify"
    assert child["ratios"]["speedup"] == pytest.approx(4.0)
    assert child["ratios"]["size_ratio"] == pytest.approx(4.0)
    assert child["ratios"]["retention"] == pytest.approx(0.87 / 0.90)
    assert any(f.startswith("not faster than its parent parent") for f in child["flags"])
    assert any("parity failed" in f for f in child["flags"])
    assert report["variants"][1]["flags"] == []
    other = build_report(variants, rows, Settings(batch_sizes=[1], seq_lens=["16"], threads=1), baseline="parent")
    assert other["baseline"] == "parent" and other["variants"][0]["ratios"]["speedup"] == pytest.approx(0.2)
    variants[1].manifest = {**parent_manifest, "stage": "finetune"}  # a fine-tuned teacher, listed second
    assert build_report(variants, rows, Settings(batch_sizes=[1], seq_lens=["16"], threads=1))["baseline"] == "parent"


def test_pareto_front():
    from shrinkbert.eval.plot import pareto_front

    points = [(10, 0.9), (2, 0.88), (2.5, 0.87), (1, 0.8), (5, 0.88)]
    assert pareto_front(points) == [3, 1, 0]


# -- the command line -------------------------------------------------------------------------------

def test_cli_end_to_end(tiny_bert, tiny_csv, tmp_path, monkeypatch, capsys):
    from shrinkbert.eval.harness import main

    monkeypatch.setenv("SHRINKBERT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "out"
    args = ["--task", str(tiny_csv), "--out", str(out), "--quick", "--runs", "3", "--threads", "1", "--no-progress"]
    assert main([str(tiny_bert), str(tmp_path / "nope")] + args) == 0
    captured = capsys.readouterr()
    assert f"error: nope ({tmp_path / 'nope'}): artifact {tmp_path / 'nope'} does not exist" in captured.err
    assert "| **model** |" in captured.out and (out / "pareto.png").is_file()
    assert main([str(tiny_bert), str(tmp_path / "nope"), "--strict"] + args) == 1
    assert "reused" in capsys.readouterr().out
    assert main([str(tmp_path / "nope")] + args) == 2
    assert "none of the 1 artifact(s) could be measured" in capsys.readouterr().err
    assert main(["--task", str(tiny_csv)]) == 2
    assert "at least one artifact" in capsys.readouterr().err


# -- labels and pairs ---------------------------------------------------------------------------------

def test_label_columns_match_by_name():
    from shrinkbert.eval.measure import label_columns

    names = ("negative", "positive")
    assert label_columns({0: "negative", 1: "positive"}, names) is None
    assert label_columns({0: "positive", 1: "negative"}, names) == [1, 0]
    assert label_columns({0: "LABEL_0", 1: "LABEL_1"}, names) is None
    assert label_columns(None, names) is None


def test_a_model_with_another_label_order_is_scored_by_name(tiny_bert, rows, tmp_path):
    from shrinkbert.eval.measure import Settings, measure

    flipped = tmp_path / "flipped"
    shutil.copytree(tiny_bert, flipped)
    config = json.loads((flipped / "config.json").read_text())
    config["id2label"] = {"0": "positive", "1": "negative"}
    config["label2id"] = {"positive": 0, "negative": 1}
    (flipped / "config.json").write_text(json.dumps(config))
    # scoring, not timing: in this process (a worker process per variant costs seconds each)
    settings = Settings(batch_sizes=[1], seq_lens=["8"], runs=1, warmup=0, threads=1, memory="off", isolate=False)
    original, swapped = measure([tiny_bert, flipped], rows, settings, progress=False)
    assert swapped.accuracy["metrics"]["accuracy"] == pytest.approx(1 - original.accuracy["metrics"]["accuracy"])
    assert swapped.accuracy["label_order"].startswith("by name")


def test_pair_rows_agree_across_runtimes(tiny_bert, onnx_dir, bundle_dir):
    from shrinkbert.eval.measure import Settings, measure
    from shrinkbert.eval.rows import from_lists

    data = tiny_sentences(16, seed=5)
    task = Task("tiny-pairs", ("negative", "positive"), pair=True)
    pair_rows = from_lists(task, [t for t, _ in data], [y for _, y in data], pairs=[t for t, _ in reversed(data)])
    settings = Settings(batch_sizes=[2], seq_lens=["real"], runs=2, warmup=0, threads=1, memory="off", isolate=False)
    variants = measure([tiny_bert, onnx_dir, bundle_dir], pair_rows, settings, progress=False)
    assert all(v.ok for v in variants), [v.error for v in variants]
    predictions = [v.accuracy["predictions"] for v in variants]
    assert predictions[0] == predictions[1] == predictions[2]
    runner_inputs = variants[0].latency["b2/real"]
    assert runner_inputs["mean_tokens_per_row"] > 2 * 5  # both texts of each pair were encoded


def test_recipe_style_config_file(tiny_bert, tiny_csv, tmp_path, monkeypatch):
    """`shrinkbert run` writes the stage's params (output_dir included) to YAML and runs --config FILE."""
    import yaml

    import shrinkbert.eval.harness as harness
    from shrinkbert.core.config import build_config

    monkeypatch.setenv("SHRINKBERT_CACHE", str(tmp_path / "cache"))
    params = {"artifacts": [str(tiny_bert)], "task": str(tiny_csv), "batch_sizes": [1], "seq_lens": ["16"],
              "output_dir": str(tmp_path / "report"), "split_seed": 0, "quick": True, "runs": 2, "progress": False}
    build_config(harness.Config, params)  # what the recipe runner validates before running
    config_file = tmp_path / "shrinkbert.eval.yaml"
    config_file.write_text(yaml.safe_dump(params))
    assert harness.main(["--config", str(config_file)]) == 0
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["settings"]["cases"] == ["b1/s16"] and report["settings"]["runs"] == 2
    assert "fastest of 2 interleaved rounds of 2 calls" in report["floor_rates"]["method"]  # quick: a brief floor


# -- timing mechanics ---------------------------------------------------------------------------------

class _FakeRunner:
    def __init__(self, name, log, fail_at=None):
        self.name, self.log, self.fail_at, self.calls = name, log, fail_at, 0

    def max_positions(self):
        return None

    def encode(self, texts, pairs, max_length, pad_to=None):
        return {"attention_mask": np.ones((len(texts), pad_to or 4), dtype=np.int64)}

    def forward(self, inputs):
        self.calls += 1
        if self.fail_at is not None and self.calls >= self.fail_at:
            raise RuntimeError("boom\nsecond line")
        self.log.append(self.name)


def test_timed_calls_are_interleaved_round_robin_with_a_rotating_start():
    from shrinkbert.eval.latency import Case, measure_interleaved

    log, errors = [], []
    runners = {n: _FakeRunner(n, log) for n in "ABC"}
    results = measure_interleaved(runners, Case(2, 8), ["t"] * 5, None, max_length=8, warmup=1, runs=3,
                                  on_error=lambda name, msg: errors.append((name, msg)))
    assert log == list("ABC") + list("ABC") + list("BCA") + list("CAB")  # warm-up, then 3 rotated rounds
    assert set(results) == set("ABC") and all(r["n"] == 3 for r in results.values()) and not errors
    # A runner that breaks is dropped with one line; the others finish.
    log.clear()
    runners = {"A": _FakeRunner("A", log), "B": _FakeRunner("B", log, fail_at=2)}
    results = measure_interleaved(runners, Case(1, None), ["a b", "c"], None, max_length=8, warmup=0, runs=3,
                                  on_error=lambda name, msg: errors.append((name, msg)))
    assert set(results) == {"A"} and results["A"]["n"] == 3
    assert errors == [("B", "b1/real: the model call failed: RuntimeError: boom")]


@pytest.mark.parametrize("isolate", [True, False], ids=["in-its-timing-worker", "in-a-memory-probe"])
def test_isolated_memory_of_a_bundle_is_torch_free(bundle_dir, rows, isolate):
    """Read in the variant's timing worker where it is timed in one, else in a fresh eval.memprobe process."""
    from shrinkbert.eval.measure import Settings, measure

    settings = Settings(batch_sizes=[2], seq_lens=["16"], runs=1, warmup=0, threads=1, memory="isolated",
                        isolate=isolate)
    (variant,) = measure([bundle_dir], rows, settings, progress=False)
    assert variant.ok and not variant.warnings, variant.warnings
    static = variant.static
    assert static["memory_process"] == ("timing worker" if isolate else "memory probe")
    assert 0 < static["memory_bytes"] < static["process_peak_bytes"]
    # onnxruntime + tokenizers + numpy only: well under a process that has merely imported torch
    torch_rss = int(subprocess.run([sys.executable, "-c", "import torch, psutil; print(psutil.Process().memory_info().rss)"],
                                   capture_output=True, text=True, check=True, timeout=120).stdout)
    assert static["process_peak_bytes"] < 0.7 * torch_rss, (static["process_peak_bytes"], torch_rss)


def test_peak_rss_sees_native_allocations():
    from shrinkbert.eval.memory import PeakRSS

    import time

    with PeakRSS() as peak:
        block = np.ones(64_000_000 // 8)  # 64 MB outside Python's allocator
        block += 1
        time.sleep(0.3)  # held for hundreds of sampling intervals: a loaded machine still sees it
        del block
    assert peak.delta_bytes > 40_000_000


def test_an_option_the_tasks_report_does_not_read_is_one_line(tiny_bert, tiny_csv, tmp_path, monkeypatch, capsys):
    """A classifier's report has no drop-in index, retrieval or NLI ranking: --index-corpus or --nli on
    it is refused before anything is measured, not ignored (and a sentence-vector report's unread
    options the same way, --quick's own settings aside)."""
    from shrinkbert.eval.configs import EvalConfig, unread_options
    from shrinkbert.eval.harness import main

    monkeypatch.setenv("SHRINKBERT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "out"
    args = ["--task", str(tiny_csv), "--out", str(out), "--quick", "--threads", "1", "--no-progress"]
    assert main([str(tiny_bert), "--index-corpus", "imdb", "--nli", "snli.csv"] + args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: --index-corpus, --nli are not read for task")
    assert "whose models give logits" in err and not out.exists()
    assert unread_options(EvalConfig(quick=True, batch_sizes=[1], memory="off"), gives="sentence vectors") == []
    assert unread_options(EvalConfig(batch_sizes=[1, 4], plot=False), gives="sentence vectors") == ["batch_sizes", "plot"]
    assert unread_options(EvalConfig(timing="inprocess", memory="inprocess"), gives="sentence vectors") == ["memory"]
    assert unread_options(EvalConfig(timing="inprocess"), gives="logits") == []
    assert unread_options(EvalConfig(nli="x.csv", batch_sizes=[4]), gives="logits") == ["nli"]


def test_torch_device_cuda_without_a_gpu_is_one_line(tiny_bert, tiny_csv, tmp_path, monkeypatch, capsys):
    """`--torch-device cuda` where torch sees no GPU stops before anything is measured, in one line;
    a sentence-vector report, which times text -> vector on the CPU, does not read the option. The
    GPU path itself is checked on a lent GPU (bench/cuda.sh's report step)."""
    import torch

    from shrinkbert.eval.configs import EvalConfig, unread_options
    from shrinkbert.eval.harness import main
    from shrinkbert.eval.runners import torch_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("SHRINKBERT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "out"
    assert main([str(tiny_bert), "--task", str(tiny_csv), "--out", str(out), "--quick", "--threads", "1",
                 "--no-progress", "--torch-device", "cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: --torch-device cuda: torch sees no CUDA device")
    assert not out.exists()
    assert torch_device("cpu").type == "cpu"
    assert unread_options(EvalConfig(torch_device="cuda"), gives="sentence vectors") == ["torch_device"]
    assert unread_options(EvalConfig(torch_device="cuda"), gives="logits") == []
