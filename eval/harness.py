"""The eval stage: measure every variant on the same test rows and write the report.

    shrinkbert eval ART [ART ...] --task TASK [--out DIR] [--baseline ART] [--quick]
    python -m shrinkbert.eval.harness runs/teacher runs/student runs/student-int8 --task movie-snippets

Artifacts are PyTorch dirs, ONNX dirs (Optimum layout) or edge bundles, in any mix. Each is
measured on the same stored test rows for accuracy (the task's metrics, through `evaluate` with
the local modules in core/metrics), latency (each variant in a worker process of its own, holding
only its runtime; warm-up, then timed calls in short bursts round-robin across the workers;
p50/p90/p99 and throughput per batch size x sequence length), memory (each
variant alone in a fresh process), file size and parameters. The report (report.json, report.md,
summary.csv, latency.csv, pareto.png) goes to --output-dir/--out, with a cache of finished
measurements (keyed by artifact content hash + settings) that a re-run reuses.

Exit status: 0 when at least one variant was measured (a failed one gets an error line and a
report row), 2 when none was (or on a bad option); with --strict, 1 when any failed.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from shrinkbert.core.config import build_config, field, make_parser, read_yaml, speaking_as
from shrinkbert.core.data.dataspec import DataConfig, resolve_spec
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.eval.cache import MeasurementCache
from shrinkbert.eval.rows import load_test_rows

QUICK = {"batch_sizes": [1], "seq_lens": ["128", "real"], "runs": 8, "warmup": 2, "max_eval_rows": 200, "memory": "off"}


@dataclass
class EvalConfig(DataConfig):
    artifacts: list[str] = field([], "artifact directories to compare (also positional)")
    output_dir: str = field("runs/eval", "output directory for the report and the measurement cache (also --out)", group="output")
    baseline: str = field("", "the artifact (path or name) ratios are computed against; default: the teacher (the first "
                                 "fine-tuned artifact), else the first")
    split: str = field("test", "which stored split to measure on", choices=("train", "validation", "test"))
    max_eval_rows: int = field(0, "measure accuracy on the first N rows of the split only (0: all)", min=0)
    batch_sizes: list[int] = field([1, 8], "batch sizes to time (comma-separated)", min=1)
    seq_lens: list[str] = field(["128", "real"], "sequence lengths to time: integers and/or 'real'")
    runs: int = field(30, "timed calls per variant and case", min=1)
    warmup: int = field(5, "untimed warm-up calls per variant and case", min=0)
    threads: int = field(0, "threads for torch and ONNX Runtime (0: all cores); stated in the report", min=0)
    max_length: int | None = field(None, "truncation length for accuracy and the 'real' latency batches (empty: the task kind's default, 128; 384 for QA)", min=8, max=8192)
    eval_batch_size: int = field(32, "batch size of the accuracy pass", min=1)
    torch_attention: str = field("eager", "attention implementation of PyTorch variants: eager or sdpa", choices=("eager", "sdpa"))
    memory: str = field("isolated", "memory: isolated (each variant alone in a fresh process, ~10 s each), "
                                    "inprocess (approximate), or off", choices=("isolated", "inprocess", "off"))
    quick: bool = field(False, f"a fast look: {QUICK}")
    cache: bool = field(True, "reuse finished measurements from --out (keyed by artifact hash + settings)")
    progress: bool = field(True, "show progress bars")
    plot: bool = field(True, "draw pareto.png")
    strict: bool = field(False, "exit 1 when any artifact failed (default: only when all failed, exit 2)")
    title: str = field("", "report title")
    index_corpus: str = field("brown", "embeddings: corpus whose sentences make the drop-in index for recall@10 "
                                       "(pick one the students were not distilled on)")
    index_sentences: int = field(10000, "embeddings: sentences in the drop-in index", min=1)
    query_sentences: int = field(1000, "embeddings: query sentences (recall@10, agreement, throughput)", min=1)
    classify: str = field("movie-snippets,bbc-news", "embeddings: labelled tasks for MTEB's frozen-embedding classification "
                                                      "(logistic regression on each variant's vectors; '' for none)")


def parse_args(argv: list[str] | None, prog: str | None = None, description: str | None = None) -> EvalConfig:
    parser = make_parser(EvalConfig, description or __doc__, prog=prog)
    parser.add_argument("paths", nargs="*", metavar="ART", help="artifact directories to compare")
    parser.add_argument("--out", dest="output_dir", default=argparse.SUPPRESS, help="same as --output-dir")
    args = vars(parser.parse_args(argv))
    config_file = args.pop("config", None)
    paths = args.pop("paths")
    values = read_yaml(config_file) if config_file else {}
    values.update(args)
    if paths:
        values["artifacts"] = paths
    return make_config(values)


def make_config(values: dict) -> EvalConfig:
    """The EvalConfig of plain values (command line + YAML, or the Python API's keywords): with
    `quick`, its settings fill every key the values do not name; at least one artifact."""
    config = build_config(EvalConfig, values)
    if config.quick:
        for key, value in QUICK.items():
            if key not in values:
                setattr(config, key, value)
    if not config.artifacts:
        raise ShrinkbertError("give at least one artifact directory to measure")
    return config


def run(config: EvalConfig, rows=None) -> tuple[dict, dict]:
    """Measure and write the report; (report, {kind: path}). `rows` overrides loading the task."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from shrinkbert.eval.measure import Settings, measure
    from shrinkbert.eval.report import build_report, write_report

    settings = Settings(batch_sizes=config.batch_sizes, seq_lens=config.seq_lens, runs=config.runs,
                        warmup=config.warmup, threads=config.threads, max_length=config.max_length or 128,
                        eval_batch_size=config.eval_batch_size, attention=config.torch_attention,
                        memory=config.memory)
    settings.cases  # validate the cases before any loading
    artifacts = list(config.artifacts)
    baseline = config.baseline or None
    if baseline and baseline not in artifacts and Path(baseline).name not in [Path(a).name for a in artifacts]:
        if not Path(baseline).is_dir():
            raise ShrinkbertError(f"--baseline {baseline} is neither one of the artifacts nor a directory")
        artifacts.insert(0, baseline)  # a baseline given by path that is not in the list is measured too
    if rows is None:
        # The task the variants were made on (the lineage records it), unless --task names another.
        spec = resolve_spec(config, [baseline or "", *artifacts])
        rows = load_test_rows(spec, split=config.split, max_rows=config.max_eval_rows or None, cache_dir=config.cache_dir)
    own = rows.kind.own_stage("eval")
    if own is not None:  # sentence embeddings: vectors are scored by Spearman and against the teacher's index
        return own(config, rows, artifacts, baseline)
    settings.max_length = rows.kind.max_length(config.max_length)  # empty: the task kind's (QA: 384)
    out = Path(config.output_dir)
    cache = MeasurementCache(out / "cache", enabled=config.cache)
    variants = measure(artifacts, rows, settings, cache, progress=config.progress)
    if baseline:
        match = [v.name for v in variants if v.path == baseline or v.name == baseline
                 or Path(v.path).resolve() == Path(baseline).resolve()]
        baseline = match[0] if match else None
    report = build_report(variants, rows, settings, baseline=baseline, title=config.title or None)
    report["cache"] = {"dir": str(out / "cache"), "hits": cache.hits, "enabled": cache.enabled}
    files = write_report(report, out, plot=config.plot)
    return report, files


def main(argv: list[str] | None = None, prog: str | None = None, description: str | None = None) -> int:
    """The eval command line (`shrinkbert eval` passes its prog and one-line summary)."""
    config = None
    try:
        with speaking_as("cli"):
            config = parse_args(argv, prog, description)
            report, files = run(config)
    except ShrinkbertError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        where = Path(config.output_dir) / "cache" if config else "the output directory"
        print(f"\ninterrupted: finished measurements are cached in {where}; run the same command again "
              "to go on from there", file=sys.stderr)
        return 130
    from shrinkbert.eval.report import to_markdown

    markdown = report.get("markdown") or to_markdown(report)
    print(markdown.split("\n## Latency")[0].rstrip())
    print("\nreport: " + ", ".join(str(p) for p in files.values()))
    if report["cache"]["hits"]:
        print(f"reused {report['cache']['hits']} cached measurement(s) from {report['cache']['dir']}")
    failed = [r for r in report["variants"] if r["error"]]
    if len(failed) == len(report["variants"]):
        print(f"error: none of the {len(failed)} artifact(s) could be measured", file=sys.stderr)
        return 2
    if failed:
        print(f"{len(failed)} of {len(report['variants'])} artifact(s) failed: "
              + ", ".join(r["name"] for r in failed), file=sys.stderr)
        return 1 if config.strict else 0
    return 0


Config = EvalConfig  # the name the recipe runner (shrinkbert run) looks for


if __name__ == "__main__":
    sys.exit(main())
