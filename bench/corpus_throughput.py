"""Corpus runs: `shrinkbert predict` over real sentences against sentence-transformers and fastembed, its memory
from a small input to a large one, kill -9 at random moments, and a Dask LocalCluster against one process.

    python bench/corpus_throughput.py                                   # 200,000 IMDB lines, the recipes' bundles
    python bench/corpus_throughput.py --rows 3000 --memory-rows 2000,8000 --kills 2 --no-record   # a smoke run
    python bench/corpus_throughput.py --fastembed-python /tmp/fastembed-venv/bin/python   # fastembed's arm too

fastembed lives in a venv of its own, never the kit's: `python -m venv /tmp/fastembed-venv &&
/tmp/fastembed-venv/bin/pip install "fastembed>=0.9,<0.10"`.

Rows are the first --rows lines of the kit's IMDB corpus (core/data/load.py load_corpus("imdb")), cycled where
more are asked for. Each arm runs in a process of its own (its peak resident memory is its own), at --threads
threads, one after the other on the same rows:

- the embeddings recipe's bundle (runs/embeddings/bundle, an int8 graph with pooling inside) through
  `predict_corpus`; sentence-transformers' ONNX backend (`SentenceTransformer(path, backend="onnx")`) on that same
  graph where it loads it, else on its own dynamic int8 export of the same student (the arm's name says which:
  its backend reads a graph of token vectors and pools them itself); fastembed (0.9, in a venv of its own, given by
  --fastembed-python) where it loads the graph from a local folder, else the reason it cannot; and the teacher in
  PyTorch fp32 through `SentenceTransformer.encode`;
- the demo's classifier bundle (runs/demo/bundle) through `predict_corpus`;
- each bundle through `predict_corpus` at its default (one stream a thread: one-thread model calls side by
  side) and as one stream on all --threads threads.

Beside rows/s and peak memory: the host's int8 floor for the bundle (eval/floor.py: its encoder's multiply-adds a
row at the corpus's mean token count, at the host's measured MatMulInteger rate) and the run's distance from it;
peak memory of `predict_corpus` at each of --memory-rows; --kills runs of `shrinkbert predict` killed with SIGKILL
at a random moment and run again until complete, counting rows lost or duplicated; and a LocalCluster of two
one-thread workers against one process of two threads, with the largest difference between their outputs.
Figures go to bench/results/corpus-runs.jsonl (bench/record.py).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bundle_label(bundle: Path) -> str:
    """A bundle's folder with its parent (demo/bundle, embeddings/bundle): the name alone is often "bundle"."""
    return f"{bundle.parent.name}/{bundle.name}"
sys.path.insert(0, str(ROOT))
for name, value in (("HF_HUB_OFFLINE", "1"), ("HF_DATASETS_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false")):
    os.environ.setdefault(name, value)

from record import record  # noqa: E402  (bench/ sibling)

SECTION = "corpus-runs"
CHILD_TIMEOUT_S = 6 * 3600


def peak_mb() -> float:
    """This process's peak resident memory (VmHWM: ru_maxrss would carry the parent's peak across exec)."""
    try:
        with open("/proc/self/status") as handle:
            return next(int(line.split()[1]) for line in handle if line.startswith("VmHWM")) / 1024.0
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def lines_file(lines: list[str], rows: int, path: Path) -> Path:
    """`rows` lines, `lines` cycled, one a line (newlines inside a text become spaces)."""
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(rows):
            handle.write(" ".join(lines[i % len(lines)].split()) + "\n")
    return path


def parent_folders(bundle: Path, depth: int = 6) -> list[Path]:
    """The bundle's lineage, nearest first, from each artifact's shrinkbert.json parents."""
    from shrinkbert.core.artifacts import read_manifest

    found, frontier = [], [bundle]
    for _ in range(depth):
        nxt = []
        for folder in frontier:
            try:
                parents = read_manifest(folder).get("parents") or []
            except Exception:  # not an artifact: the end of the line
                parents = []
            for parent in parents:
                path = Path(parent["path"] if isinstance(parent, dict) else parent)
                if path.is_dir() and path not in found:
                    found.append(path)
                    nxt.append(path)
        frontier = nxt
    return found


# ---------------------------------------------------------------------------------------------
# Arms: each runs in a child process and prints one JSON line


def arm_shrinkbert(spec: dict) -> dict:
    import shrinkbert

    out = Path(spec["out"])
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    shrinkbert.predict_corpus(spec["bundle"], [spec["input"]], out, threads=spec.get("threads"),
                              streams=spec.get("streams"), cluster=spec.get("cluster"), progress=False, shard_rows=spec.get("shard_rows", 20000),
                              **({"batch_tokens": spec["batch_tokens"]} if spec.get("batch_tokens") else {}))
    return {"seconds": time.perf_counter() - start}


def arm_st(spec: dict) -> dict:
    """sentence-transformers on the bundle's graph (ONNX backend) or on the teacher (PyTorch fp32)."""
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(spec["threads"])
    texts = Path(spec["input"]).read_text(encoding="utf-8").splitlines()
    if spec["backend"] == "onnx":
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = spec["threads"]
        model = SentenceTransformer(spec["model"], backend="onnx", device="cpu",
                                    model_kwargs={"file_name": spec["file_name"], "session_options": options})
    else:
        model = SentenceTransformer(spec["model"], device="cpu")
    if spec.get("max_length"):  # the bundle's truncation: the same tokens a row in every arm
        model.max_seq_length = min(model.max_seq_length or spec["max_length"], spec["max_length"])
    model.encode(texts[:64], batch_size=32)  # warm
    start = time.perf_counter()
    model.encode(texts, batch_size=32, normalize_embeddings=True)
    return {"seconds": time.perf_counter() - start}


ARMS = {"shrinkbert": arm_shrinkbert, "sentence-transformers": arm_st}

FASTEMBED_CHILD = r"""
import json, sys, time
from fastembed import TextEmbedding
from fastembed.common.model_description import PoolingType, ModelSource
spec = json.loads(sys.argv[1])
texts = open(spec["input"], encoding="utf-8").read().splitlines()
try:
    TextEmbedding.add_custom_model(model="local/shrinkbert-bundle", pooling=PoolingType.DISABLED, normalization=True,
                                   sources=ModelSource(hf="local/shrinkbert-bundle"), dim=spec["dim"],
                                   model_file="model.onnx", output_name=spec["output"])
    model = TextEmbedding("local/shrinkbert-bundle", specific_model_path=spec["model"], threads=spec["threads"])
    list(model.embed(texts[:64]))
except Exception as err:
    print(json.dumps({"error": f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:300]}))
    sys.exit(0)
start = time.perf_counter()
for _ in model.embed(texts, batch_size=32):
    pass
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"seconds": time.perf_counter() - start, "peak_mb": hwm / 1024.0}))
"""


def child_main(arm: str, spec: dict) -> int:
    result = ARMS[arm](spec)
    print(json.dumps({**result, "peak_mb": peak_mb()}))
    return 0


def run_child(arm: str, spec: dict, python: str = sys.executable) -> dict:
    command = ([python, "-c", FASTEMBED_CHILD, json.dumps(spec)] if arm == "fastembed"
               else [python, __file__, "--child", arm, json.dumps(spec)])
    done = subprocess.run(command, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
                          env={**os.environ, "OMP_NUM_THREADS": str(spec.get("threads") or 1)})
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["exit " + str(done.returncode)])[-1][:300]}
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------
# Sentence-transformers' and the teacher's folders, and the floor


def st_onnx_folder(bundle: Path, work: Path) -> tuple[str, str, str]:
    """(folder, file name, arm name) for sentence-transformers' ONNX backend: the bundle's own graph in the
    student's sentence-transformers folder where the backend loads it, else the backend's own int8 export."""
    student = next((p for p in parent_folders(bundle) if is_st_model(p)), None)
    if student is None:
        raise RuntimeError("no sentence-transformers model with PyTorch weights in the bundle's lineage")
    folder = work / "st-same-graph"
    shutil.copytree(student, folder, dirs_exist_ok=True)
    (folder / "onnx").mkdir(exist_ok=True)
    shutil.copyfile(bundle / "model.onnx", folder / "onnx" / "model.onnx")
    probe = run_child("sentence-transformers", {"backend": "onnx", "model": str(folder), "file_name": "onnx/model.onnx",
                                                "input": str(work / "probe.txt"), "threads": 1,
                                                "max_length": bundle_max_length(bundle)})
    if "error" not in probe:
        return str(folder), "onnx/model.onnx", "sentence-transformers onnx, the same int8 graph"
    print(f"sentence-transformers' ONNX backend cannot run the bundle's graph ({probe['error']}); "
          "using its own dynamic int8 export of the same student")
    from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model

    own = work / "st-own-int8"
    shutil.copytree(student, own, dirs_exist_ok=True)
    model = SentenceTransformer(str(own), backend="onnx", device="cpu")
    export_dynamic_quantized_onnx_model(model, "avx512_vnni" if "avx512_vnni" in cpu_flags() else "avx2", str(own))
    name = next(p.relative_to(own).as_posix() for p in (own / "onnx").glob("model_q*.onnx"))
    return str(own), name, "sentence-transformers onnx, its own int8 export"


def is_st_model(folder: Path) -> bool:
    """A sentence-transformers folder of PyTorch weights (the exports in a bundle's lineage hold a pooled graph)."""
    return (folder / "modules.json").is_file() and any((folder / n).is_file() for n in
                                                       ("model.safetensors", "pytorch_model.bin"))


def fastembed_folder(bundle: Path, work: Path) -> str:
    """The bundle's graph and tokenizer.json with the tokenizer's config files fastembed reads besides (from the
    student's folder in the bundle's lineage): fastembed loads a local model from such a folder."""
    folder = work / "fastembed-model"
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("model.onnx", "tokenizer.json"):
        shutil.copyfile(bundle / name, folder / name)
    source = next((p for p in parent_folders(bundle) if (p / "tokenizer_config.json").is_file()), None)
    for name in ("config.json", "tokenizer_config.json", "special_tokens_map.json"):
        if source is not None and (source / name).is_file():
            shutil.copyfile(source / name, folder / name)
    config = folder / "tokenizer_config.json"  # the bundle's truncation, which fastembed reads from here
    settings = json.loads(config.read_text()) if config.is_file() else {}
    config.write_text(json.dumps({**settings, "model_max_length": bundle_max_length(bundle)}))
    return str(folder)


def bundle_max_length(bundle: Path) -> int:
    return int(json.loads((bundle / "embedding.json").read_text())["max_length"])


def cpu_flags() -> set[str]:
    try:
        return set(next(l for l in open("/proc/cpuinfo") if l.startswith("flags")).split(":")[1].split())
    except (OSError, StopIteration):
        return set()


def floor_rows_s(bundle: Path, texts: list[str], threads: int) -> dict | None:
    """The host's int8 floor in rows/s for the bundle's encoder at the texts' mean token count."""
    from tokenizers import Tokenizer

    from shrinkbert.core.artifacts import read_manifest
    from shrinkbert.eval.floor import encoder_shape, host_rates, multiply_adds, variant_config

    config = next((c for c in (variant_config(p, read_manifest(p) if (p / "shrinkbert.json").is_file() else None)
                               for p in [bundle, *parent_folders(bundle)]) if c is not None), None)
    if config is None:
        return None
    tokenizer = Tokenizer.from_file(str(bundle / "tokenizer.json"))
    meta = json.loads(next((bundle / n).read_text() for n in ("embedding.json", "labels.json") if (bundle / n).is_file()))
    tokenizer.enable_truncation(int(meta.get("max_length", 128)))
    tokenizer.no_padding()
    sample = texts[:2000]
    tokens = sum(len(e.ids) for e in tokenizer.encode_batch(sample)) / max(1, len(sample))
    macs = multiply_adds(encoder_shape(config), 1, tokens)
    rate = host_rates(threads)["int8"]
    return {"mean_tokens": round(tokens, 1), "macs_per_row": macs, "int8_gops": rate,
            "floor_rows_s": rate * 1e9 / (2 * macs)}


# ---------------------------------------------------------------------------------------------
# Resume under kill -9, and Dask against one process


def killed_runs(bundle: Path, path: Path, work: Path, runs: int, threads: int, seed: int = 0) -> list[dict]:
    """`runs` times: `shrinkbert predict` killed with SIGKILL at a random moment, run again until it completes;
    the ids then present against the input's."""
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    expected = sum(1 for line in open(path, encoding="utf-8") if line.strip())
    probe = time.perf_counter()
    command = lambda out: [sys.executable, "-m", "shrinkbert", "predict", str(bundle), "--input", str(path),  # noqa: E731
                           "--output", str(out), "--no-progress", "--threads", str(threads),
                           "--shard-rows", str(max(50, expected // 40))]
    subprocess.run(command(work / "kill-probe"), capture_output=True, timeout=CHILD_TIMEOUT_S, check=True)
    duration = time.perf_counter() - probe
    results = []
    for run in range(runs):
        out = work / f"kill-{run}"
        shutil.rmtree(out, ignore_errors=True)
        child = subprocess.Popen(command(out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        moment = rng.uniform(0.1, 0.9) * duration
        try:
            child.wait(timeout=moment)
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
        again = subprocess.run(command(out), capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
        ids = pq.read_table(out, columns=["id"]).column("id").to_pylist() if again.returncode == 0 else []
        results.append({"run": run + 1, "killed_at_s": round(moment, 2), "resumed_ok": again.returncode == 0,
                        "rows_lost": expected - len(set(ids)), "rows_duplicated": len(ids) - len(set(ids))})
    return results


def largest_difference(one: Path, other: Path) -> dict:
    import numpy as np
    import pyarrow.parquet as pq

    a, b = pq.read_table(one), pq.read_table(other)
    same_ids = a.column("id").to_pylist() == b.column("id").to_pylist()
    if "embedding" in a.column_names:
        x = np.asarray(a.column("embedding").to_pylist(), np.float32)
        y = np.asarray(b.column("embedding").to_pylist(), np.float32)
        return {"same_ids": same_ids, "max_abs_diff": float(np.abs(x - y).max()), "labels_equal": None}
    scores = np.abs(np.asarray(a.column("score").to_pylist()) - np.asarray(b.column("score").to_pylist()))
    return {"same_ids": same_ids, "max_abs_diff": float(scores.max()),
            "labels_equal": a.column("label").to_pylist() == b.column("label").to_pylist()}


# ---------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, metavar=("ARM", "SPEC"), help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, default=200_000, help="IMDB lines each arm embeds or labels")
    parser.add_argument("--embedding-bundle", default=str(ROOT / "runs" / "embeddings" / "bundle"))
    parser.add_argument("--classifier-bundle", default=str(ROOT / "runs" / "demo" / "bundle"))
    parser.add_argument("--teacher", default="", help="the teacher for the PyTorch fp32 arm (default: the "
                                                      "embedding bundle's nearest sentence-transformers ancestor "
                                                      "without a student of its own, else the built-in MiniLM)")
    parser.add_argument("--teacher-rows", type=int, default=20_000,
                        help="rows of the teacher's PyTorch fp32 arm, the first of --rows (0: all; fp32 at about "
                             "150 rows/s on 2 cores would take 20 minutes over 200,000); its rows/s is over these")
    parser.add_argument("--kill-rows", type=int, default=20_000,
                        help="rows of each kill -9 run, the first of --rows (0: all): the count that matters is of "
                             "rows lost or duplicated, not the run's length")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-tokens", default="",
                        help="other --batch-tokens sizes, comma-separated, each an arm beside the default's (rows/s "
                             "and peak memory)")
    parser.add_argument("--memory-rows", default="10000,1000000", help="input sizes whose peak memory is compared")
    parser.add_argument("--kills", type=int, default=5, help="runs killed with SIGKILL at a random moment")
    parser.add_argument("--fastembed-python", default="", help="a python with fastembed installed (its own venv)")
    parser.add_argument("--work", default="", help="scratch folder (default: a temporary one)")
    parser.add_argument("--parts", default="throughput,memory,kills",
                        help="what to measure, comma-separated: throughput (the arms, Dask and the floor), memory "
                             "(peak memory at each of --memory-rows), kills (kill -9 and resume)")
    parser.add_argument("--no-record", action="store_true", help="print the figures, write no results line")
    args = parser.parse_args(argv)
    if args.child:
        return child_main(args.child[0], json.loads(args.child[1]))

    from shrinkbert.core.data.load import load_corpus
    from shrinkbert.deploy.corpus_batches import BATCH_TOKENS

    work = Path(args.work or tempfile.mkdtemp(prefix="corpus-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    lines = [line for line in load_corpus("imdb", max_lines=args.rows) if line.strip()]
    corpus = lines_file(lines, args.rows, work / "imdb.txt")
    lines_file(lines, 64, work / "probe.txt")
    threads, rows = args.threads, args.rows
    embed_bundle, class_bundle = Path(args.embedding_bundle), Path(args.classifier_bundle)
    arms = []

    def add(name: str, bundle: Path, result: dict, arm_rows: int = 0) -> None:
        seconds, arm_rows = result.get("seconds"), arm_rows or rows
        arms.append({"arm": name, "bundle": bundle_label(bundle), "rows": arm_rows,
                     "rows_s": round(arm_rows / seconds, 1) if seconds else None,
                     "peak_mb": round(result["peak_mb"], 1) if result.get("peak_mb") else None,
                     "note": result.get("error", "")})
        print(arms[-1])

    parts = {part.strip() for part in args.parts.split(",") if part.strip()}
    one_process = {}
    for bundle in (embed_bundle, class_bundle):
        if not bundle.is_dir():
            print(f"{bundle}: no bundle there (run its recipe first); skipped")
            continue
        one_process[bundle] = work / f"out-{bundle.name}-{len(one_process)}"
        if "throughput" not in parts:
            continue
        add(f"shrinkbert predict, {threads} threads (default: a stream a thread, {BATCH_TOKENS}-token batches)", bundle,
            run_child("shrinkbert", {"bundle": str(bundle), "input": str(corpus), "out": str(one_process[bundle]),
                                     "threads": threads}))
        add(f"shrinkbert predict, 1 stream x {threads} threads", bundle,
            run_child("shrinkbert", {"bundle": str(bundle), "input": str(corpus), "out": str(work / "one-stream"),
                                     "threads": threads, "streams": 1}))
        shutil.rmtree(work / "one-stream", ignore_errors=True)
        for size in (int(s) for s in args.batch_tokens.split(",") if s.strip()):
            add(f"shrinkbert predict, {threads} threads, {size}-token batches", bundle,
                run_child("shrinkbert", {"bundle": str(bundle), "input": str(corpus), "out": str(work / "sized"),
                                         "threads": threads, "batch_tokens": size}))
            shutil.rmtree(work / "sized", ignore_errors=True)
        dask_out = work / f"dask-{len(one_process)}"
        add("shrinkbert predict, Dask LocalCluster 2 x 1 thread", bundle,
            run_child("shrinkbert", {"bundle": str(bundle), "input": str(corpus), "out": str(dask_out),
                                     "cluster": "local:2"}))
        arms[-1]["note"] = arms[-1]["note"] or (json.dumps(largest_difference(one_process[bundle], dask_out))
                                                + "; peak_mb: the driver's, workers apart")

    if embed_bundle in one_process and "throughput" in parts:
        try:
            folder, file_name, name = st_onnx_folder(embed_bundle, work)
            add(name, embed_bundle, run_child("sentence-transformers", {"backend": "onnx", "model": folder,
                                                                       "file_name": file_name, "input": str(corpus),
                                                                       "threads": threads,
                                                                       "max_length": bundle_max_length(embed_bundle)}))
        except Exception as err:  # recorded, not fatal: the other arms still stand
            add("sentence-transformers onnx", embed_bundle, {"error": f"{type(err).__name__}: {err}"[:300]})
        if args.fastembed_python:
            meta = json.loads((embed_bundle / "embedding.json").read_text())
            add("fastembed", embed_bundle, run_child("fastembed", {"model": fastembed_folder(embed_bundle, work),
                                                                   "input": str(corpus),
                                                                   "threads": threads, "dim": meta["dim"],
                                                                   "output": meta.get("output", "sentence_embedding")},
                                                     python=args.fastembed_python))
        teacher = args.teacher or teacher_of(embed_bundle)
        teacher_rows = min(args.teacher_rows or rows, rows)
        teacher_input = corpus if teacher_rows == rows else lines_file(lines, teacher_rows, work / "teacher.txt")
        add(f"teacher fp32 (sentence-transformers encode, {Path(teacher).name})", embed_bundle,
            run_child("sentence-transformers", {"backend": "torch", "model": teacher, "input": str(teacher_input),
                                                "threads": threads, "max_length": bundle_max_length(embed_bundle)}),
            arm_rows=teacher_rows)

    floors = []
    for bundle in one_process if "throughput" in parts else ():
        floor = floor_rows_s(bundle, lines, threads)
        if floor:
            mine = next(a["rows_s"] for a in arms if a["bundle"] == bundle_label(bundle) and a["arm"].startswith("shrinkbert predict,"))
            floors.append({"bundle": bundle_label(bundle), **floor, "floor_rows_s": round(floor["floor_rows_s"], 1),
                           "rows_s": mine, "times_floor": round(floor["floor_rows_s"] / mine, 2) if mine else None})
            print(floors[-1])

    memory, kills = [], []
    target = next(iter(one_process), None)
    if target is not None:
        for size in (int(s) for s in args.memory_rows.split(",") if s.strip() and "memory" in parts):
            path = lines_file(lines, size, work / f"memory-{size}.txt")
            result = run_child("shrinkbert", {"bundle": str(target), "input": str(path), "out": str(work / f"mem-{size}"),
                                              "threads": threads})
            memory.append({"bundle": bundle_label(target), "rows": size, "peak_mb": round(result.get("peak_mb", 0), 1)})
            print(memory[-1])
            path.unlink()
            shutil.rmtree(work / f"mem-{size}", ignore_errors=True)
        kill_rows = min(args.kill_rows or rows, rows)
        kill_input = corpus if kill_rows == rows else lines_file(lines, kill_rows, work / "kills.txt")
        kills = killed_runs(target, kill_input, work, args.kills, threads) if "kills" in parts else []
        for line in kills:
            print(line)

    if not args.no_record and arms:  # each figure its own line: a run of some parts leaves the others' latest
        note = (f"{rows:,} IMDB lines truncated to the bundle's max_length in every arm (the teacher's: the first "
                f"{min(args.teacher_rows or rows, rows):,} of them), {threads} threads an arm (Dask: "
                "2 workers x 1 thread, its cluster's start included), each arm a process of its own")
        record("corpus-throughput", section=SECTION, title="Rows/s and peak memory over a corpus", rows=arms, note=note)
    if not args.no_record:
        if floors:
            record("corpus-floor", section=SECTION, title="Distance from the host's int8 floor", rows=floors,
                   note="floor: the encoder's multiply-adds a row at the corpus's mean tokens, at the host's "
                        "MatMulInteger rate (eval/floor.py)")
        if memory:
            record("corpus-memory", section=SECTION, title="Peak memory by input size", rows=memory,
                   note="predict_corpus in a process of its own, default shards and windows")
        if kills:
            record("corpus-kills", section=SECTION, title="Rows lost or duplicated after kill -9", rows=kills,
                   note=f"shrinkbert predict over {min(args.kill_rows or rows, rows):,} IMDB lines killed with SIGKILL "
                        "at a uniform random moment, then run again")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def teacher_of(bundle: Path) -> str:
    """The oldest sentence-transformers folder in the bundle's lineage (the teacher), else the built-in MiniLM."""
    folders = [p for p in parent_folders(bundle) if is_st_model(p)]
    if folders:
        return str(folders[-1])
    from shrinkbert.core.builtin import minilm_path

    return str(minilm_path())


if __name__ == "__main__":
    sys.exit(main())
