"""The report: one JSON (machine-readable), Markdown and CSV tables; the plot lives in eval/plot.py.

Every row carries its lineage (from shrinkbert.json), its ratios to the baseline at the
headline case (speed-up, size ratio, accuracy retention), and flags: slower than (or as slow
as) its nearest measured ancestor, export parity failed, or an error line. Its accuracy
difference to the baseline and to that ancestor on the same test rows comes with a paired
bootstrap 95% interval and McNemar's test (eval/stats.py; "n.s." where the interval covers zero).

A task is judged by its kind's report metric (core/kinds: a sequence task's first metric; a
token task's entity F1 for seqeval, else word accuracy): retention, the plot's y axis and the
tables name it.
"""
from __future__ import annotations

import csv
import io
import json
import os
import time
from pathlib import Path
from typing import Any

from shrinkbert.core.artifacts import library_versions, write_files
from shrinkbert.core.device import describe_machine
from shrinkbert.core.kinds import kind_of
from shrinkbert.core.metrics import f1_average
from shrinkbert.eval.floor import variant_floor
from shrinkbert.eval.latency import REAL
from shrinkbert.eval.lineage import manifest_flags
from shrinkbert.eval.measure import Settings, Variant
from shrinkbert.eval.memory import METHODS as MEMORY_METHODS
from shrinkbert.eval.plot import pareto_plot
from shrinkbert.eval.rows import TestRows
from shrinkbert.eval.stats import RESAMPLES, SEED, compare, difference_text
from shrinkbert.eval.targets import describe as describe_target
from shrinkbert.eval.targets import judge, target_record, variant_runtime

_CALLS = "model call only (inputs tokenized beforehand), wall clock (perf_counter); "
_ROUNDS = "warm-up calls first; timed calls round-robin across the {} in short bursts with a rotating start; GC paused while timing"
TIMING_METHOD = {  # by Settings.isolate (eval --timing isolated | inprocess)
    True: _CALLS + "each variant in a worker process of its own holding only its runtime (PyTorch: torch; ONNX: "
                   "onnxruntime, no torch; a bundle: its own Predictor); " + _ROUNDS.format("workers"),
    False: _CALLS + "every variant in the report's own process (--timing inprocess), sharing its threads and memory "
                    "with the others: a quick look, not a figure to quote; " + _ROUNDS.format("variants")}
BUSY_CORES = 0.25  # other processes' average CPU use, in cores, above which timings are called disturbed
PACKAGING_STAGES = ("bundle",)
SIZE_METHOD = "bytes of the model's weight/graph files (safetensors, or the .onnx graph and its external data)"


def _ratio(numerator, denominator):
    if numerator is None or denominator in (None, 0):
        return None
    return float(numerator) / float(denominator)


def build_report(variants: list[Variant], rows: TestRows, settings: Settings, baseline: str | None = None,
                 title: str | None = None, rates: dict[str, Any] | None = None) -> dict[str, Any]:
    """The whole report as one JSON-able dict; the tables and the plot are drawn from it. With `rates`
    (eval/floor.py host_rates), each variant also gets its floor per case."""
    headline = settings.headline.label
    primary, primary_name = rows.kind.report_metric(rows.task)
    measured = [v for v in variants if v.ok]
    if baseline:
        base = next((v for v in variants if v.name == baseline or v.path == baseline), None)
    else:
        # The teacher (the fine-tuned model the others came from), wherever it stands in the list.
        teachers = [v for v in variants if (v.manifest or {}).get("stage") == "finetune"]
        base = teachers[0] if teachers else (variants[0] if variants else None)
    baseline_note = None
    if base is not None and not base.ok:
        baseline_note = f"the baseline {base.name} could not be measured; ratios are against the first measured variant"
        base = None
    if base is None:
        base = measured[0] if measured else None

    def p50(v: Variant):
        return (v.latency.get(headline) or {}).get("p50")

    def score(v: Variant):
        return (v.accuracy.get("metrics") or {}).get(primary)

    by_hash = {v.static.get("content_hash") or v.content_hash: v for v in measured if v.content_hash}
    by_path = {str(Path(v.path).resolve()): v for v in measured}
    out_rows = []
    for v in variants:
        row: dict[str, Any] = {
            "name": v.name, "path": v.path, "kind": v.kind or None, "error": v.error,
            "stage": v.manifest.get("stage") if v.manifest else None,
            "lineage": v.lineage.get("text") if v.lineage else None,
            "lineage_stages": v.lineage.get("stages") if v.lineage else None,
            "hash": v.content_hash or None,
            "runtime": v.static.get("runtime"),
            "metrics": dict(v.accuracy.get("metrics") or {}),
            "test_rows": v.accuracy.get("n"),
            **({"test_words": v.accuracy.get("words"), "words_dropped": v.accuracy.get("words_dropped")}
               if rows.kind.scores_words else {}),
            "latency_ms": v.latency,
            "timed_with": _timed_with(v),
            "size_bytes": v.static.get("size_bytes"),
            "num_parameters": v.static.get("num_parameters"),
            "num_parameters_source": v.static.get("num_parameters_source"),
            "memory_bytes": v.static.get("memory_bytes"),
            "process_peak_bytes": v.static.get("process_peak_bytes"),
            "memory_process": v.static.get("memory_process"),  # timing worker, memory probe, or None
            "warnings": list(v.warnings),
            "cached": list(v.cached),
            "flags": [],
        }
        if v.ok and rates is not None and not (v.kind == "pytorch" and settings.device != "cpu"):  # CPU rates
            row["floor"] = variant_floor(v.path, v.manifest, v.static.get("kind") or v.kind,
                                         v.static.get("model_files") or [], settings.cases, v.latency, rates)
        if v.ok and base is not None:
            row["ratios"] = {
                "speedup": _ratio(p50(base), p50(v)),
                "size_ratio": _ratio(base.static.get("size_bytes"), v.static.get("size_bytes")),
                "retention": _ratio(score(v), score(base)),
            }
            base_pred, own_pred = base.accuracy.get("predictions"), v.accuracy.get("predictions")
            # Token tasks: word by word, only when both scored the same words of every row.
            same_words = base.accuracy.get("word_counts") == v.accuracy.get("word_counts")
            if base_pred and own_pred and len(base_pred) == len(own_pred) and same_words:
                row["agreement_with_baseline"] = sum(a == b for a, b in zip(base_pred, own_pred)) / len(own_pred)
            if v is not base:
                row["vs_baseline"] = paired_difference(v, base, rows)
        if v.ok:
            ancestor = _nearest_measured_ancestor(v, by_hash, by_path)
            if ancestor is not None:
                row["measured_parent"] = ancestor.name
                if ancestor is not base:
                    row["vs_parent"] = paired_difference(v, ancestor, rows)
                mine, theirs = p50(v), p50(ancestor)
                # A bundle repackages its parent's graph: speed is not what it is for, so no flag.
                packaging = (v.manifest or {}).get("stage") in PACKAGING_STAGES
                if mine is not None and theirs is not None and mine >= theirs and not packaging:
                    row["flags"].append(f"not faster than its parent {ancestor.name} "
                                        f"(p50 {mine:.2f} vs {theirs:.2f} ms at {headline})")
            row["flags"].extend(manifest_flags(v.manifest) if v.manifest else [])
            ancestors = (v.lineage or {}).get("ancestors", [])
            record = target_record(v.manifest or {}, ancestors)
            if record is not None:
                row["target"] = judge(record, variant_runtime(v.kind, v.manifest or {}, ancestors), row)
                if row["target"]["met"] is False:
                    row["flags"].append(f"misses its target: {describe_target(row['target'])} "
                                        f"({row['target']['judged_on']})")
        else:
            row["flags"].append(f"error: {v.error}")
        out_rows.append(row)

    lengths = _length_summary(measured, settings)
    return {
        "title": title or f"shrinkbert eval: {rows.task.name}",
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "task": rows.task.to_dict(),
        "f1_average": f1_average(rows.task.num_labels) if "f1" in rows.task.metrics else None,
        "primary_metric": primary,
        "primary_metric_name": primary_name,
        "metric_columns": [list(c) for c in metric_columns(rows.task)],
        "test_rows": {"source": rows.source, "n": len(rows), "fingerprint": rows.fingerprint,
                      **({"words": rows.num_words} if rows.kind.scores_words else {}), **lengths},
        "baseline": base.name if base else None,
        "baseline_note": baseline_note,
        "headline_case": headline,
        "settings": {
            "threads": settings.threads, "runs": settings.runs, "warmup": settings.warmup,
            "batch_sizes": list(settings.batch_sizes), "seq_lens": list(settings.seq_lens),
            "cases": [c.label for c in settings.cases], "max_length": settings.max_length,
            "torch_attention": settings.attention, "torch_device": _torch_device(settings),
            "eval_batch_size": settings.eval_batch_size,
            "timing": TIMING_METHOD[settings.isolate], "memory": MEMORY_METHODS[settings.memory], "memory_mode": settings.memory, "size": SIZE_METHOD,
            "threads_detail": _threads_detail(settings),
        },
        "machine": describe_machine(),
        "load_average": _load_average(variants),
        "other_load": _other_load(variants),
        "versions": library_versions(),
        "floor_rates": rates,
        "variants": out_rows,
    }


def correctness(v: Variant, rows: TestRows) -> tuple[list, list[int] | None] | str:
    """(right/wrong per scored unit, units per row or None) of a variant on the test rows, or why not.

    A kind's scoring may record "correct" itself (a token task: one 0/1 per scored word, with
    "word_counts" per row); otherwise a row is right when its predicted label is its gold label."""
    accuracy = v.accuracy or {}
    if accuracy.get("correct") is not None:
        return list(accuracy["correct"]), accuracy.get("word_counts")
    predictions = accuracy.get("predictions")
    if rows.kind.scores_words:
        return "this measurement recorded no per-word correctness (measured before it did: re-measure with --no-cache)"
    if not predictions or len(predictions) != len(rows) or not all(isinstance(x, int) for x in rows.labels):
        return "no per-row predictions to compare with the gold labels"
    return [int(p == gold) for p, gold in zip(predictions, rows.labels)], None


def paired_difference(v: Variant, other: Variant, rows: TestRows) -> dict[str, Any]:
    """v's accuracy minus other's on the same test rows: the paired bootstrap 95% interval (rows
    resampled; a token task's words resampled with their sentence) and McNemar's test (eval/stats.py)."""
    mine, theirs = correctness(v, rows), correctness(other, rows)
    for reason in (mine, theirs):
        if isinstance(reason, str):
            return {"vs": other.name, "unavailable": reason}
    if mine[1] != theirs[1] or len(mine[0]) != len(theirs[0]):
        return {"vs": other.name, "unavailable": f"the two scored different {rows.kind.scored_unit} "
                                                 "(truncation or tokenizer differ)"}
    metric = (v.accuracy or {}).get("correct_metric") or ("word accuracy" if mine[1] is not None else "accuracy")
    return {"vs": other.name, "metric": metric, **compare(mine[0], theirs[0], row_counts=mine[1]).to_dict()}


def _timed_with(v: Variant) -> dict[str, Any] | None:
    """The runtime settings the variant's latency was measured with (the same for every case)."""
    return next((stats["timed_with"] for stats in v.latency.values() if stats.get("timed_with")), None)


def _torch_device(settings: Settings) -> str:
    """Where the PyTorch variants ran: "cpu", or "cuda (the GPU's name, torch's CUDA version)"."""
    if settings.device == "cpu":
        return "cpu"
    import torch

    return f"{settings.device} ({torch.cuda.get_device_name(0)}, CUDA {torch.version.cuda})"


def _threads_detail(settings: Settings) -> str:
    if not settings.isolate:
        return (f"one process for all: torch.set_num_threads({settings.threads}); ORT intra_op_num_threads="
                f"{settings.threads}, inter_op 1, allow_spinning=0")
    return (f"each variant's own process: torch.set_num_threads({settings.threads}); ORT intra_op_num_threads="
            f"{settings.threads}, inter_op 1, spinning on (ORT's default), denormals flushed to zero as a bundle "
            f"runs; a bundle: its Predictor with its own spinning and denormal defaults, and its own thread count where "
            f"it chose fewer (labels.json \"runtime\", timed at its task's text length), else {settings.threads}; "
            "read back per variant under 'Runtime settings'")


def _other_load(variants: list[Variant]) -> dict[str, Any] | None:
    """The most CPU that other processes used while a case was timed (the harness's own processes
    not counted), in cores: above BUSY_CORES, timings are disturbed."""
    loads = [st["other_cpu_cores"] for v in variants for st in v.latency.values()
             if st.get("other_cpu_cores") is not None]
    if not loads:
        return None
    return {"max_cores": max(loads), "min_cores": min(loads), "cores": os.cpu_count(), "busy_above": BUSY_CORES}


def _load_average(variants: list[Variant]) -> dict[str, float] | None:
    """The highest 1-minute load average seen at the end of a timed case: above the core count,
    other processes shared the CPU while timing."""
    loads = [st["load_1m"] for v in variants for st in v.latency.values() if st.get("load_1m") is not None]
    if not loads:
        return None
    return {"max_1m_while_timing": max(loads), "min_1m_while_timing": min(loads), "cores": os.cpu_count()}


def _length_summary(measured: list[Variant], settings: Settings) -> dict[str, Any]:
    for v in measured:
        for label, stats in v.latency.items():
            if label.endswith(REAL) and "mean_tokens_per_row" in stats:
                return {"mean_tokens_per_row": stats["mean_tokens_per_row"]}
    return {}


def _nearest_measured_ancestor(v: Variant, by_hash, by_path) -> Variant | None:
    for ancestor in (v.lineage or {}).get("ancestors", []):
        match = by_hash.get(ancestor.get("hash")) or by_path.get(str(Path(ancestor.get("path") or "/").resolve()))
        if match is not None and match is not v:
            return match
    return None


# -- tables ----------------------------------------------------------------------------------

def _fmt(value, spec: str = ".3f", suffix: str = "") -> str:
    if value is None:
        return "–"
    return f"{value:{spec}}{suffix}"


def _mb(value) -> str:
    return "–" if value is None else f"{value / 1e6:.3g}"


def _params(value) -> str:
    if value is None:
        return "–"
    if value < 1000:
        return str(value)
    return f"{value / 1e6:.2f}M" if value >= 1e5 else f"{value / 1e3:.1f}k"


def metric_columns(task) -> list[tuple[str, str, str]]:
    """(column, key in a variant's metrics, name for tables) per reported metric. A sequence task:
    its metrics as they are. A token task: entity F1/precision/recall for seqeval, word accuracy."""
    return kind_of(task).metric_columns(task)


def _metric_columns(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    if report.get("metric_columns"):
        return [tuple(c) for c in report["metric_columns"]]
    return [(m, m, m) for m in report["task"]["metrics"]]  # a report written before token tasks


def _primary_name(report: dict[str, Any]) -> str:
    return report.get("primary_metric_name") or report["primary_metric"]


def summary_table(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One flat dict per variant: the summary both the Markdown and the CSV show."""
    head = report["headline_case"]
    columns = _metric_columns(report)
    table = []
    for row in report["variants"]:
        lat = (row.get("latency_ms") or {}).get(head) or {}
        ratios = row.get("ratios") or {}
        entry = {"variant": row["name"], "kind": row["kind"], "lineage": row["lineage"]}
        for column, key, _ in columns:
            entry[column] = row["metrics"].get(key)
        entry.update({
            f"p50_ms@{head}": lat.get("p50"), f"p90_ms@{head}": lat.get("p90"), f"p99_ms@{head}": lat.get("p99"),
            f"rows_per_s@{head}": lat.get("throughput_per_s"),
            "speedup": ratios.get("speedup"), "size_mb": None if row["size_bytes"] is None else row["size_bytes"] / 1e6,
            "size_ratio": ratios.get("size_ratio"), "retention": ratios.get("retention"),
            "agreement": row.get("agreement_with_baseline"),
            **_difference_columns(row),
            "params": row["num_parameters"],
            "ram_mb": None if row["memory_bytes"] is None else row["memory_bytes"] / 1e6,
            "process_peak_mb": None if row.get("process_peak_bytes") is None else row["process_peak_bytes"] / 1e6,
            "flags": "; ".join(row["flags"]), "path": row["path"],
        })
        table.append(entry)
    return table


def _difference_columns(row: dict[str, Any]) -> dict[str, Any]:
    """The paired difference to the baseline (points, 95% interval, McNemar's mid-p) as CSV columns."""
    diff = row.get("vs_baseline") or {}
    points = {k: None if diff.get(k) is None else diff[k] * 100 for k in ("difference", "low", "high")}
    return {"diff_vs_baseline_pts": points["difference"], "diff_ci_low_pts": points["low"],
            "diff_ci_high_pts": points["high"], "diff_significant": diff.get("significant"),
            "mcnemar_p_mid": diff.get("p_mid")}


def differences_markdown(report: dict[str, Any]) -> list[str]:
    """The section on paired differences: each variant against the baseline and its measured parent."""
    lines = []
    for row in report["variants"]:
        for record in (row.get("vs_baseline"), row.get("vs_parent")):
            if not record:
                continue
            if "difference" not in record:
                lines.append(f"| {row['name']} | {record['vs']} | – | – | – | {record['unavailable']} |")
                continue
            lines.append(f"| {row['name']} | {record['vs']} | {difference_text(record)} | "
                         f"{record['p_mid']:.3g} ({record['p_exact']:.3g}) | {record['a_only']} / {record['b_only']} | "
                         f"{record['metric']}, {record['n']} rows |")
    if not lines:
        return []
    return ["", "## Differences on the same test rows", "",
            "Accuracy difference in points with its paired bootstrap 95% interval (test rows resampled "
            f"{RESAMPLES:,} times, seed {SEED}; a token task's words with their sentence); n.s. = the interval covers zero, so the test "
            "rows cannot tell the two apart. McNemar's test on the rows one gets right and the other wrong: "
            "mid-p (exact p); its word-level p for a token task treats words as independent.", "",
            "| variant | vs | Δ points [95% CI] | McNemar mid-p (exact) | only variant right / only other right | on |",
            "|---|---|--:|--:|--:|---|"] + lines


def to_markdown(report: dict[str, Any]) -> str:
    s = report["settings"]
    head = report["headline_case"]
    columns = _metric_columns(report)
    described, unit = kind_of(report["task"]).description, kind_of(report["task"]).scored_unit
    words = report["test_rows"].get("words")
    lines = [f"# {report['title']}", ""]
    lines.append(f"Task **{report['task']['name']}** ({len(report['task']['label_names'])} labels"
                 f"{f', {described}' if described else ''}), {report['test_rows']['n']} test rows"
                 f"{f' ({words} words)' if words is not None else ''} from "
                 f"{report['test_rows']['source'] or 'the given rows'}. "
                 f"Baseline: **{report['baseline']}**. Headline case: **{head}** (batch/sequence length). "
                 f"Threads: **{s['threads']}**. Machine: {report['machine']}"
                 + (f"; PyTorch variants on **{s['torch_device']}**." if s.get("torch_device", "cpu") != "cpu" else "."))
    if report.get("baseline_note"):
        lines += ["", f"> **Baseline:** {report['baseline_note']}."]
    lines += _busy_note(report)
    lines += ["", f"## Summary at {head}", ""]
    header = (["variant", "lineage"] + [name for _, _, name in columns] +
              ["p50 ms", "speed-up", "size MB", "x smaller", "retention", "Δ vs baseline [95% CI]", "agrees", "params",
               "RAM MB", "process MB",
               "target", "flags"])
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join(["---"] * 2 + ["--:"] * (len(header) - 3) + ["---"]) + "|")
    for row, entry in zip(report["variants"], summary_table(report)):
        name = f"**{row['name']}**" if row["name"] == report["baseline"] else row["name"]
        cells = [name, row["lineage"] or "–"]
        cells += [_fmt(entry[column], ".4f") for column, _, _ in columns]
        cells += [_fmt(entry[f"p50_ms@{head}"], ".2f"), _fmt(entry["speedup"], ".2f", "x"),
                  _mb(row["size_bytes"]), _fmt(entry["size_ratio"], ".1f", "x"),
                  _fmt(None if entry["retention"] is None else entry["retention"] * 100, ".1f", "%"),
                  difference_text(row.get("vs_baseline")),
                  _fmt(None if entry["agreement"] is None else entry["agreement"] * 100, ".1f", "%"),
                  _params(row["num_parameters"]), _mb(row["memory_bytes"]), _mb(row.get("process_peak_bytes")),
                  describe_target(row["target"]) if row.get("target") else "–",
                  "⚠ " + "; ".join(row["flags"]) if row["flags"] else ""]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines += differences_markdown(report)
    floors = report.get("floor_rates") is not None
    lines += ["", "## Latency per case (ms per batch; rows/s = throughput"
              + ("; floor = the variant's matrix products at the host's rate" if floors else "") + ")", "",
              "| variant | case | min | p50 | p90 | p99 | mean | rows/s | tokens/row |" + (" floor ms | p50 / floor |" if floors else ""),
              "|---|---|--:|--:|--:|--:|--:|--:|--:|" + ("--:|--:|" if floors else "")]
    for row in report["variants"]:
        for case in s["cases"]:
            st = (row.get("latency_ms") or {}).get(case)
            if not st:
                continue
            cells = [_fmt(st.get(k), ".2f") for k in ("min", "p50", "p90", "p99", "mean")]
            cells += [_fmt(st.get("throughput_per_s"), ".1f"), _fmt(st.get("mean_tokens_per_row"), ".1f")]
            if floors:
                floor = ((row.get("floor") or {}).get("cases") or {}).get(case) or {}
                cells += [_fmt(floor.get("floor_ms"), ".3f"), _fmt(floor.get("p50_over_floor"), ".1f", "x")]
            lines.append(f"| {row['name']} | {case} | " + " | ".join(cells) + " |")
    lines += runtime_markdown(report)
    accuracy_line = kind_of(report["task"]).metrics_note(report, columns, s["max_length"])
    if accuracy_line is None:
        accuracy_line = (f"- Accuracy: {', '.join(name for _, _, name in columns)} through `evaluate` (local modules in core/metrics)"
                         + (f", F1 {report['f1_average']}" if report.get("f1_average") else "")
                         + f"; inputs truncated at {s['max_length']} tokens (edge bundles use their own Predictor).")
    lines += ["", "## How this was measured", "",
              accuracy_line,
              f"- Latency: {s['timing']}; {s['warmup']} warm-up + {s['runs']} timed calls per variant and case; "
              f"`sNNN` = every row padded to NNN tokens, `real` = batches of consecutive test rows (spread over the "
              f"whole test set) padded to the longest in the batch. Speed-up = baseline p50 / variant p50 at {head}.",
              f"- Threads: {s['threads_detail']}. PyTorch attention: {s['torch_attention']}; PyTorch variants "
              f"ran on {s.get('torch_device', 'cpu')}.",
              *([floor_line(report["floor_rates"])] if floors else []),
              f"- Memory: {s['memory']}.", f"- Size: {s['size']}; x smaller = baseline size / variant size.",
              "- Retention = variant / baseline on " + _primary_name(report)
              + (f"; agrees = share of {'test rows' if unit == 'rows' else unit} where the variant predicts the "
                 "baseline's label."),
              "- Target: the `--target` the variant's student was distilled to, judged on this report's own "
              "figures (a latency target: p50 at batch 1 and the student's sequence length, on the runtime it was "
              "picked for; a share: parameters vs the teacher's; a size: the model file); ✓ met, ✗ missed, – not "
              "judged here.",
              "- Flags: not faster than its nearest measured ancestor at the headline case; a check its stage "
              "recorded as failed (export parity, bundle agreement, int8 tolerance); a missed target. Timings are noisy on a shared machine: compare ratios within one run."]
    errors = [r for r in report["variants"] if r["error"]]
    warnings = [(r["name"], w) for r in report["variants"] for w in r["warnings"]]
    if errors or warnings:
        lines += ["", "## Errors and warnings", ""]
        lines += [f"- **{r['name']}** ({r['path']}): error: {r['error']}" for r in errors]
        lines += [f"- {name}: {w}" for name, w in warnings]
    return "\n".join(lines) + "\n"


def floor_line(rates: dict[str, Any]) -> str:
    """How the floor column was made: the host's measured rates and what each variant is held to."""
    return (f"- Floor: the host's rates at {rates['threads']} threads ({rates['method']}): int8 "
            f"{rates['int8']:,.0f} GOP/s, ONNX Runtime fp32 {rates['onnx_fp32']:,.0f}, PyTorch fp32 "
            f"{rates['torch_fp32']:,.0f} ({rates['machine']}). A variant's floor is its encoder's dense products "
            "(projections, FFN, attention's two products; not its head, lookups, norms or activations) at the "
            "rate of the arithmetic it runs (an int8 graph at the int8 rate, an fp32 graph at ONNX Runtime's, "
            "PyTorch at PyTorch's); p50 / floor = how many times that the variant "
            "takes (eval/floor.py).")


def _busy_note(report: dict[str, Any]) -> list[str]:
    """A warning when other processes took CPU while timing (the harness's own are not counted);
    a report written before that was measured judges by the load average, as it did then."""
    other = report.get("other_load")
    if other:
        if other["max_cores"] <= other["busy_above"]:
            return []
        what = (f"other processes kept up to {other['max_cores']:.2f} of {other['cores']} cores busy while timing "
                "(the harness's own processes not counted)")
    else:
        load = report.get("load_average")
        if not (load and load["cores"] and load["max_1m_while_timing"] > load["cores"]):
            return []
        what = f"load average up to {load['max_1m_while_timing']} on {load['cores']} cores while timing"
    return ["", f"> **Busy machine:** {what}. Absolute timings are inflated and spread out (see p90/p99); the "
                "interleaved ratios are the figures to trust, and `min` the least disturbed one."]


def runtime_markdown(report: dict[str, Any]) -> list[str]:
    """The settings each variant was timed with, as its worker process read them back."""
    rows = [(row["name"], row["timed_with"]) for row in report["variants"] if row.get("timed_with")]
    if not rows:
        return []
    lines = ["", "## Runtime settings (read back from each variant's timing process)", "",
             "| variant | process | runtime | threads | ORT spinning | denormals flushed | libraries loaded |",
             "|---|---|---|--:|---|---|---|"]

    def on_off(value) -> str:
        return "–" if value is None else ("on" if value else "off")

    for name, timed in rows:
        threads = timed.get("threads")
        lines.append(f"| {name} | {timed.get('process', '–')} | {timed.get('runtime') or timed.get('describe', '–')} | "
                     f"{'ORT default' if threads == 0 else _fmt(threads, 'd')} | {on_off(timed.get('spin'))} | "
                     f"{on_off(timed.get('flush_denormals'))} | {', '.join(timed.get('libraries') or []) or '–'} |")
    return lines


def summary_csv(report: dict[str, Any]) -> str:
    table = summary_table(report)
    buffer = io.StringIO()
    if table:
        writer = csv.DictWriter(buffer, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    return buffer.getvalue()


def latency_csv(report: dict[str, Any]) -> str:
    buffer = io.StringIO()
    fields = ["variant", "case", "batch_size", "seq_len", "p50", "p90", "p99", "mean", "min", "n",
              "throughput_per_s", "tokens_per_s", "mean_tokens_per_row", "floor_ms", "p50_over_floor"]
    writer = csv.DictWriter(buffer, fieldnames=fields, extrasaction="ignore")
    writer.writeheader()
    for row in report["variants"]:
        for case, st in (row.get("latency_ms") or {}).items():
            batch, length = case.split("/")
            floor = ((row.get("floor") or {}).get("cases") or {}).get(case) or {}
            writer.writerow({"variant": row["name"], "case": case, "batch_size": batch[1:],
                             "seq_len": length.lstrip("s"), **st, **floor})
    return buffer.getvalue()


def write_report(report: dict[str, Any], out_dir: str | Path, plot: bool = True) -> dict[str, Path]:
    """report.json, report.md, summary.csv, latency.csv and pareto.png in out_dir; their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {"json": out_dir / "report.json", "md": out_dir / "report.md",
             "csv": out_dir / "summary.csv", "latency_csv": out_dir / "latency.csv"}
    write_files({files["json"]: json.dumps(report, indent=2, default=float) + "\n",
                 files["md"]: to_markdown(report), files["csv"]: summary_csv(report),
                 files["latency_csv"]: latency_csv(report)})
    if plot:
        files["png"] = out_dir / "pareto.png"
        tmp = out_dir / f".pareto.{os.getpid()}.tmp.png"
        pareto_plot(report, tmp)
        os.replace(tmp, files["png"])
    return files
