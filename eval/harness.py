"""The eval stage: measure every variant on the same test rows and write the report.

    shrinkbert eval ART [ART ...] --task TASK [--out DIR] [--baseline ART] [--quick]
    python -m shrinkbert.eval.harness runs/teacher runs/student runs/student-int8 --task movie-snippets

Artifacts are PyTorch dirs, ONNX dirs (Optimum layout) or edge bundles, in any mix. What is
measured follows what the task kind's models give (its `gives`, `REPORTS`): logits in
eval/measure.py and eval/report.py, sentence vectors in eval/vector_report.py (Spearman of cosines,
agreement with the baseline's vectors, retrieval in its index). A logit model is
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

import os
import sys
from pathlib import Path

from shrinkbert.core.config import build_config, read_yaml, refuse_options, speaking_as, take_no_verify
from shrinkbert.core.data.dataspec import resolve_spec
from shrinkbert.core.errors import ShrinkbertError, error_line
from shrinkbert.eval.cache import MeasurementCache
from shrinkbert.eval.configs import QUICK, EvalConfig, eval_parser, unread_options
from shrinkbert.eval.rows import load_test_rows


def parse_args(argv: list[str] | None, prog: str | None = None, description: str | None = None) -> EvalConfig:
    parser = eval_parser(description or __doc__, prog=prog)
    args = vars(parser.parse_args(argv))
    take_no_verify(args)
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


def floor_rates(config: EvalConfig, settings, cache: MeasurementCache, variants) -> dict:
    """The host's GEMM rates for the floor column (eval/floor.py), timed once every variant's worker
    has closed, so nothing else shares the cores; reused from the cache, like the latencies they sit
    beside, only when every variant's every case came from it (then they come from the same run)."""
    from shrinkbert.core.device import describe_machine
    from shrinkbert.eval.cache import cache_key
    from shrinkbert.eval.floor import host_rates

    # a quick look times the products briefly too: 2 rounds of 2 calls, a fraction of the full timing
    rounds, calls = (2, 2) if config.quick else (5, 5)
    key = cache_key("host-rates", describe_machine(), settings.threads, rounds, calls)
    all_cached = all(case.label in v.cached for v in variants if v.ok for case in settings.cases)
    rates = cache.get("rates", key) if all_cached else None
    if rates is None:
        rates = host_rates(settings.threads, rounds=rounds, calls=calls)
        cache.put("rates", key, rates)
    return rates


def report_logits(config: EvalConfig, rows, artifacts: list[str], baseline: str | None, settings) -> tuple[dict, dict]:
    """The report of models that give logits (eval/measure.py, eval/report.py): (report, {kind: path})."""
    from shrinkbert.eval.measure import measure
    from shrinkbert.eval.report import build_report, write_report

    settings.max_length = rows.kind.max_length(config.max_length)  # empty: the task kind's (QA: 384)
    out = Path(config.output_dir)
    cache = MeasurementCache(out / "cache", enabled=config.cache)
    variants = measure(artifacts, rows, settings, cache, progress=config.progress)
    rates = floor_rates(config, settings, cache, variants) if config.floor else None
    if baseline:
        match = [v.name for v in variants if v.path == baseline or v.name == baseline
                 or Path(v.path).resolve() == Path(baseline).resolve()]
        baseline = match[0] if match else None
    report = build_report(variants, rows, settings, baseline=baseline, title=config.title or None, rates=rates)
    report["cache"] = {"dir": str(out / "cache"), "hits": cache.hits, "enabled": cache.enabled}
    files = write_report(report, out, plot=config.plot)
    return report, files


def report_vectors(config: EvalConfig, rows, artifacts: list[str], baseline: str | None, settings) -> tuple[dict, dict]:
    """The report of models that give sentence vectors (eval/vector_report.py): scored by their vectors'
    cosines, and against the baseline's index; (report, {kind: path})."""
    from shrinkbert.eval.vector_report import measure_vectors, write_vector_report

    report = measure_vectors(config, rows, artifacts, baseline)
    return report, write_vector_report(report, config.output_dir)


# The report of each answer to what the rows' models give (TaskKind.gives).
REPORTS = {"logits": report_logits, "sentence vectors": report_vectors}


def run(config: EvalConfig, rows=None) -> tuple[dict, dict]:
    """Measure and write the report; (report, {kind: path}). `rows` overrides loading the task."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from shrinkbert.eval.measure import Settings

    settings = Settings(batch_sizes=config.batch_sizes, seq_lens=config.seq_lens, runs=config.runs,
                        warmup=config.warmup, threads=config.threads, max_length=config.max_length or 128,
                        eval_batch_size=config.eval_batch_size, attention=config.torch_attention,
                        device=config.torch_device, memory=config.memory,
                        isolate=config.timing == "isolated")
    settings.cases  # validate the cases before any loading
    if config.torch_device != "cpu":  # no GPU here: one line before anything loads
        from shrinkbert.eval.runners import torch_device

        torch_device(config.torch_device)
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
    gives = rows.kind.gives
    refuse_options(unread_options(config, gives), f"for task '{rows.task.name}', whose models give {gives}")
    return REPORTS[gives](config, rows, artifacts, baseline, settings)


def main(argv: list[str] | None = None, prog: str | None = None, description: str | None = None) -> int:
    """The eval command line (`shrinkbert eval` passes its prog and one-line summary)."""
    config = None
    try:
        with speaking_as("cli"):
            config = parse_args(argv, prog, description)
            report, files = run(config)
    except Exception as err:  # a user's error, a full disk or a refused folder: one line
        line = error_line(err)
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
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
