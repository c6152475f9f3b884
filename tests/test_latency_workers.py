"""Latency as deployed: each variant timed in a process of its own with the settings it
ships with; the bundle's thread and spin options; the busy-machine check counts others only."""
from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from shrinkbert.core.data.tasks import Task
from fixtures import tiny_sentences

TASK = Task("tiny", ("negative", "positive"), metrics=("accuracy",))
SPIN = "session.intra_op.allow_spinning"


@pytest.fixture(scope="module")
def rows():
    from shrinkbert.eval.rows import from_lists

    data = tiny_sentences(16, seed=4)
    return from_lists(TASK, [t for t, _ in data], [y for _, y in data], source="tiny_sentences(16)")


@pytest.fixture(scope="module")
def onnx_dir(tiny_bert, tmp_path_factory) -> Path:
    from shrinkbert.compress import export

    out = tmp_path_factory.mktemp("onnx") / "tiny-onnx"
    return Path(export.run(export.Config(model=str(tiny_bert), output_dir=str(out), parity_rows=8, max_length=32)))


@pytest.fixture(scope="module")
def bundle_dir(onnx_dir, tmp_path_factory) -> Path:
    from shrinkbert.compress import bundle

    out = tmp_path_factory.mktemp("bundle") / "tiny-bundle"
    return Path(bundle.run(bundle.Config(model=str(onnx_dir), output_dir=str(out), parity_rows=8, max_length=32)))


@pytest.fixture(scope="module")
def report(tiny_bert, onnx_dir, bundle_dir, rows, tmp_path_factory):
    from shrinkbert.eval.harness import EvalConfig, run

    out = tmp_path_factory.mktemp("eval-out")
    config = EvalConfig(artifacts=[str(tiny_bert), str(onnx_dir), str(bundle_dir)], task="tiny", output_dir=str(out),
                        batch_sizes=[1], seq_lens=["16"], runs=6, warmup=1, threads=1, progress=False, memory="off",
                        plot=False)
    report, files = run(config, rows=rows)
    return {"report": report, "markdown": files["md"].read_text(),
            "rows": {Path(p).name: r for p, r in zip(config.artifacts, report["variants"])}}


def _worker(path: Path, kind: str):
    from shrinkbert.eval.workers import start_workers

    workers, errors = start_workers({"v": {"path": path, "kind": kind}}, threads=1)
    assert not errors, errors
    return workers["v"]


def test_a_worker_reads_its_variants_memory_without_a_tokenizer(onnx_dir):
    """The report's isolated memory, read in the timing worker: the growth over loading the graph and one
    call is the graph's (positive, under the process's own peak), and the process still holds onnxruntime
    alone; a worker not asked for memory at open refuses to guess it in one line."""
    from shrinkbert.core.errors import ShrinkbertError
    from shrinkbert.eval.workers import launch_workers, ready_workers

    batch = {"input_ids": np.ones((4, 32), np.int64), "attention_mask": np.ones((4, 32), np.int64),
             "token_type_ids": np.zeros((4, 32), np.int64)}
    launched = launch_workers({"mem": {"path": onnx_dir, "kind": "onnx", "memory": True},
                               "plain": {"path": onnx_dir, "kind": "onnx"}}, threads=1)
    try:
        memory = launched["mem"].memory_of(batch)  # waits for the worker's answer to "open" itself
        workers, errors = ready_workers(launched)
        assert not errors and set(workers) == {"mem", "plain"}, errors
        assert 0 < memory["delta_bytes"] < memory["process_peak_bytes"], memory
        assert memory["base_rss_bytes"] < memory["process_peak_bytes"], memory
        libraries = workers["mem"].timed_with["libraries"]
        assert "onnxruntime" in libraries and "transformers" not in libraries and "torch" not in libraries, libraries
        with pytest.raises(ShrinkbertError, match="memory was not asked for"):
            workers["plain"].memory_of(batch)
        workers["plain"].load("b1", [batch])  # the worker still times after the refusal
        assert len(workers["plain"].time("b1", [0])) == 1
    finally:
        for worker in launched.values():
            worker.close()


@pytest.mark.parametrize("which", ["onnx", "bundle"])
def test_an_onnx_worker_never_imports_torch(which, onnx_dir, bundle_dir):
    path = onnx_dir if which == "onnx" else bundle_dir
    worker = _worker(path, which)
    try:
        libraries = worker.timed_with["libraries"]
        assert "onnxruntime" in libraries
        assert "torch" not in libraries and "transformers" not in libraries, libraries
        worker.load("b1", [{"input_ids": np.ones((1, 8), np.int64), "attention_mask": np.ones((1, 8), np.int64),
                            "token_type_ids": np.zeros((1, 8), np.int64)}])
        assert len(worker.time("b1", [0, 0, 0])) == 3
    finally:
        worker.close()


def test_the_worker_module_imports_no_heavy_library():
    """What the ONNX worker process loads before it opens anything: none of torch or transformers."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "import shrinkbert.eval.worker"],
                          capture_output=True, text=True, timeout=120, check=True)
    imported = {line.split("|")[-1].strip().split(".")[0] for line in done.stderr.splitlines() if "|" in line}
    assert "shrinkbert" in imported and not imported & {"torch", "transformers", "onnxruntime"}, imported & {"torch"}


def test_a_failing_variant_in_a_worker_is_one_line(tmp_path):
    from shrinkbert.eval.workers import start_workers

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "model.onnx").write_bytes(b"\x00garbage")
    workers, errors = start_workers({"bad": {"path": bad, "kind": "onnx"}}, threads=1)
    assert not workers and "not a loadable ONNX model" in errors["bad"] and "\n" not in errors["bad"]


def test_the_settings_a_variant_was_timed_with_are_in_the_report(report, tiny_bert, onnx_dir, bundle_dir):
    rows = report["rows"]
    torch_row, onnx_row, bundle_row = rows[tiny_bert.name], rows[onnx_dir.name], rows[bundle_dir.name]
    for row in (torch_row, onnx_row, bundle_row):
        assert row["error"] is None, row["error"]
        assert row["timed_with"]["process"] == "own" and row["timed_with"]["threads"] == 1
        assert row["latency_ms"]["b1/s16"]["timed_with"] == row["timed_with"]
    assert torch_row["timed_with"]["runtime"].startswith("torch") and "torch" in torch_row["timed_with"]["libraries"]
    assert onnx_row["timed_with"]["spin"] is True  # ORT's default: nothing else in its process
    assert "torch" not in onnx_row["timed_with"]["libraries"] and "torch" not in bundle_row["timed_with"]["libraries"]
    # the bundle keeps its own spinning default (labels.json "runtime")
    labels = json.loads((bundle_dir / "labels.json").read_text())
    assert bundle_row["timed_with"]["spin"] is labels["runtime"]["spin"]
    markdown = report["markdown"]
    assert "## Runtime settings" in markdown
    assert f"| {onnx_dir.name} | own | onnxruntime " in markdown and "| 1 | on | " in markdown
    assert "worker process of its own" in report["report"]["settings"]["timing"]
    assert report["report"]["other_load"]["max_cores"] >= 0


def test_the_bundle_honours_its_thread_and_spin_options(bundle_dir):
    from shrinkbert.eval.runners import load_bundle_module

    module = load_bundle_module(bundle_dir)
    labels = json.loads((bundle_dir / "labels.json").read_text())
    assert set(labels["runtime"]) == {"threads", "spin", "flush_denormals"} and labels["runtime"]["threads"] in (None, 1)
    default = module.Predictor(str(bundle_dir)).session.get_session_options()
    assert default.get_session_config_entry(SPIN) == ("1" if labels["runtime"]["spin"] else "0")
    assert default.intra_op_num_threads == (labels["runtime"]["threads"] or 0)  # 0: ORT's own default
    shared = module.Predictor(str(bundle_dir), threads=1, spin=False).session.get_session_options()
    assert shared.intra_op_num_threads == 1 and shared.get_session_config_entry(SPIN) == "0"
    spinning = module.Predictor(str(bundle_dir), threads=2, spin=True).session.get_session_options()
    assert spinning.intra_op_num_threads == 2 and spinning.get_session_config_entry(SPIN) == "1"
    # the command line: --threads and --no-spin reach the session, reported by --benchmark
    done = subprocess.run([sys.executable, str(bundle_dir / "predict.py"), "--benchmark", "3", "--threads", "1",
                           "--no-spin", "--seq-len", "16"], capture_output=True, text=True, timeout=120, check=True)
    measured = json.loads(done.stdout)
    assert (measured["threads"], measured["spin"], measured["case"], measured["runs"]) == (1, False, "b1/s16", 3)
    assert measured["p50_ms"] > 0


def test_the_bundle_flushes_denormals_on_its_own_threads_only(bundle_dir):
    """The bundle's ONNX Runtime threads flush denormal floats to zero (its default, labels.json "runtime"),
    its outputs stay those of a plain session, and the thread that made it keeps its own settings (ONNX
    Runtime would set flush-to-zero on it too: the session is made on a thread of its own)."""
    import numpy as np
    import torch

    from shrinkbert.eval.runners import load_bundle_module

    module = load_bundle_module(bundle_dir)
    assert json.loads((bundle_dir / "labels.json").read_text())["runtime"]["flush_denormals"] is True
    tiny = torch.tensor([1e-39])
    flushing = module.Predictor(str(bundle_dir), threads=2)
    assert flushing.session.get_session_options().get_session_config_entry("session.set_denormal_as_zero") == "1"
    assert flushing.runtime["flush_denormals"] is True
    assert (tiny * 1.0).item() > 0 and np.float32(1e-39) * np.float32(1.0) > 0  # this thread still has denormals
    plain = module.Predictor(str(bundle_dir), flush_denormals=False)
    assert plain.runtime["flush_denormals"] is False
    texts = ["a gripping film", "dull", "one of the best films this year, and I have seen many " * 3]
    assert np.allclose(flushing.logits(texts), plain.logits(texts), atol=1e-6)


def test_a_one_thread_bundle_flushes_on_the_callers_thread_and_the_harness_keeps_its_own(bundle_dir):
    """One ONNX Runtime thread computes on the caller's thread, so a flushing one-thread session flushes
    there (bundle_files.open_session); the kit's own process (the harness's bundle runner, with PyTorch in
    it) keeps its denormals. Each in a fresh process: the first ONNX Runtime session made on a thread sets its mode."""
    def denormals_kept_after(*calls: str) -> list[str]:
        probe = "\n".join([
            "import sys, numpy as np", f"sys.path.insert(0, {str(bundle_dir)!r})", "from predict import Predictor",
            "from shrinkbert.eval.runners import BundleRunner", "kept = []"]
            + [f"{call}; kept.append(float(np.float32(1e-39) * np.float32(1.0)) > 0)" for call in calls]
            + ["print(*kept)"])
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
        return done.stdout.split()

    assert denormals_kept_after(f"Predictor({str(bundle_dir)!r}, threads=1)") == ["False"]
    assert denormals_kept_after(f"Predictor({str(bundle_dir)!r}, threads=2)") == ["True"]
    assert denormals_kept_after(f"BundleRunner({str(bundle_dir)!r}, 1)",
                                f"Predictor({str(bundle_dir)!r}, threads=1, flush_denormals=False)") == ["True", "True"]


def test_the_bundle_manifest_records_its_runtime_choice(bundle_dir):
    from shrinkbert.core.artifacts import read_manifest

    runtime = read_manifest(bundle_dir)["metrics"]["runtime"]
    labels = json.loads((bundle_dir / "labels.json").read_text())
    assert runtime["spin"] is labels["runtime"]["spin"] and runtime["threads"] == labels["runtime"]["threads"]
    # the base (ORT's thread count, spinning on) and each alternative: spinning off, one thread
    p50 = runtime["p50_ms"]
    assert set(p50) == {"threads default, spin on", "threads default, spin off", "threads 1, spin on"}
    assert all(v > 0 for v in p50.values()) and "fresh process" in runtime["chosen_by"]
    chosen = f"threads {runtime['threads'] or 'default'}, spin {'on' if runtime['spin'] else 'off'}"
    # timed where the task's texts are (the parity rows' mean token count), each setting also at s32 (max_length)
    longest = read_manifest(bundle_dir)["config"]["max_length"]
    assert "mean token count of the task's texts" in runtime["chosen_by"]
    length = int(runtime["chosen_by"].split("/s")[1].split(" ")[0])
    long = runtime[f"p50_ms_s{longest}"]
    assert 2 <= length < longest and set(long) == set(p50) and all(v > 0 for v in long.values())
    # an alternative replaces the base only when 10% faster at that length and not 10% slower at the longest,
    # and then the fastest such one
    base = "threads default, spin on"
    eligible = {name for name, ms in p50.items() if ms < 0.9 * p50[base] and 0.9 * long[name] <= long[base]}
    assert chosen == (min(eligible, key=p50.get) if eligible else base)


class _Log:
    def __init__(self, name, log):
        self.name, self.log = name, log

    def max_positions(self):
        return None

    def encode(self, texts, pairs, max_length, pad_to=None):
        return {"attention_mask": np.ones((len(texts), pad_to or 4), dtype=np.int64)}

    def forward(self, inputs):
        self.log.append(self.name)


def test_bursts_go_round_robin_with_a_rotating_start():
    from shrinkbert.eval.latency import Case, measure_interleaved

    log = []
    runners = {n: _Log(n, log) for n in "AB"}
    results = measure_interleaved(runners, Case(1, 8), ["t"] * 4, None, max_length=8, warmup=2, runs=5, burst=2)
    # warm-up: one burst of 2 each; timed: bursts of 2, 2, 1, the first variant rotating
    assert "".join(log) == "AABB" + "AABB" + "BBAA" + "AB"
    assert all(r["n"] == 5 for r in results.values())
    # one untimed lead-in call before each burst: made, and left out of the figures
    log.clear()
    results = measure_interleaved(runners, Case(1, 8), ["t"] * 4, None, max_length=8, warmup=0, runs=2, burst=2,
                                  lead_in=1, settle_s=0.01)
    assert "".join(log) == "AAABBB" and all(r["n"] == 2 for r in results.values())


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_the_busy_check_counts_other_processes_not_the_harness():
    from shrinkbert.eval.latency import OtherLoad

    # the same window counted twice: with this process left out, and with nothing left out (the
    # suite's other worker may be busy meanwhile: both counts see it, only one sees this process)
    with OtherLoad([]) as everyone, OtherLoad([os.getpid()]) as own:
        _spin(0.6)  # the harness itself keeps one core busy
    assert own.cores is not None and everyone.cores - own.cores > 0.4, (everyone.cores, own.cores)
    other = multiprocessing.get_context("spawn").Process(target=_spin, args=(3.0,))
    other.start()
    try:
        time.sleep(1.0)  # past the interpreter's start-up
        with OtherLoad([os.getpid()]) as busy:
            time.sleep(0.8)
    finally:
        other.join()
    assert busy.cores > 0.6, busy.cores


def test_in_process_timing_says_so_and_keeps_spinning_off(bundle_dir, rows):
    from shrinkbert.eval.measure import Settings, measure
    from shrinkbert.eval.runners import open_runner

    settings = Settings(batch_sizes=[1], seq_lens=["16"], runs=2, warmup=0, threads=1, memory="off", isolate=False)
    (variant,) = measure([bundle_dir], rows, settings, progress=False)
    timed_with = variant.latency["b1/s16"]["timed_with"]
    assert (timed_with["process"], timed_with["threads"], timed_with["spin"]) == ("shared", 1, False)
    runner = open_runner(bundle_dir, 1)  # the harness's own copy shares its process with torch: no spinning
    try:
        assert runner.session.get_session_options().get_session_config_entry(SPIN) == "0"
    finally:
        runner.close()


def test_a_set_spin_is_written_untimed(onnx_dir, tmp_path):
    from shrinkbert.compress import bundle
    from shrinkbert.core.artifacts import read_manifest

    out = Path(bundle.run(bundle.Config(model=str(onnx_dir), output_dir=str(tmp_path / "off"), parity_rows=8,
                                        max_length=32, spin="off", threads="default")))
    assert json.loads((out / "labels.json").read_text())["runtime"] == {"threads": None, "spin": False, "flush_denormals": True}
    runtime = read_manifest(out)["metrics"]["runtime"]
    assert runtime["spin"] is False and "p50_ms" not in runtime and "not measured" in runtime["chosen_by"]
    # a thread count set is written untimed too, and the Predictor runs with it
    out = Path(bundle.run(bundle.Config(model=str(onnx_dir), output_dir=str(tmp_path / "two"), parity_rows=8,
                                        max_length=32, spin="on", threads="2")))
    assert json.loads((out / "labels.json").read_text())["runtime"] == {"threads": 2, "spin": True, "flush_denormals": True}
    assert "p50_ms" not in read_manifest(out)["metrics"]["runtime"]
    from shrinkbert.eval.runners import load_bundle_module

    assert load_bundle_module(out).Predictor(str(out)).session.get_session_options().intra_op_num_threads == 2
    # the report's worker runs a bundle as it ships, but never on more threads than the report gives all
    from shrinkbert.eval.worker import LOADERS

    one = Path(bundle.run(bundle.Config(model=str(onnx_dir), output_dir=str(tmp_path / "one"), parity_rows=8,
                                        max_length=32, spin="on", threads="1")))
    timed = {name: LOADERS["bundle"](path, report_threads, "eager", {}, {})[2]["threads"]
             for name, path, report_threads in (("one at 2", one, 2), ("two at 1", out, 1), ("two at 2", out, 2))}
    assert timed == {"one at 2": 1, "two at 1": 1, "two at 2": 2}
    with pytest.raises(Exception, match="threads must be"):
        bundle.run(bundle.Config(model=str(onnx_dir), output_dir=str(tmp_path / "bad"), max_length=32, threads="many"))
    assert not (tmp_path / "bad").exists()
