"""The report: one JSON (machine-readable), Markdown and CSV tables; the plot lives in eval/plot.py.

Every row carries its lineage (from shrinkbert.json), its ratios to the baseline at the
headline case (speed-up, size ratio, accuracy retention), and flags: slower than (or as slow
as) its nearest measured ancestor, export parity failed, or an error line.

A token task (tagging) is judged by its primary metric (core.tagging.primary_metric: entity F1
for a seqeval task, else word accuracy): retention, the plot's y axis and the tables name it.
"""
from __future__ import annotations

import csv
import io
import json
import os
import time
from pathlib import Path
from typing import Any

from shrinkbert.core.artifacts import library_versions
from shrinkbert.core.device import describe_machine
from shrinkbert.core.metrics import f1_average
from shrinkbert.core.tagging import primary_metric
from shrinkbert.eval.latency import REAL
from shrinkbert.eval.lineage import manifest_flags
from shrinkbert.eval.targets import describe as describe_target
from shrinkbert.eval.targets import judge, target_record, variant_runtime
from shrinkbert.eval.memory import METHODS as MEMORY_METHODS
from shrinkbert.eval.measure import Settings, Variant
from shrinkbert.eval.rows import TestRows

TIMING_METHOD = ("model call only (inputs tokenized beforehand), wall clock (perf_counter); warm-up calls first; "
                 "timed calls round-robin across variants with a rotating start; GC paused while timing")
PACKAGING_STAGES = ("bundle",)
SIZE_METHOD = "bytes of the model's weight/graph files (safetensors, or the .onnx graph and its external data)"


def _ratio(numerator, denominator):
    if numerator is None or denominator in (None, 0):
        return None
    return float(numerator) / float(denominator)


def build_report(variants: list[Variant], rows: TestRows, settings: Settings, baseline: str | None = None,
                 title: str | None = None) -> dict[str, Any]:
    """The whole report as one JSON-able dict; the tables and the plot are drawn from it."""
    headline = settings.headline.label
    primary, primary_name = primary_metric(rows.task) if rows.is_token else (rows.task.metrics[0],) * 2
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
               if rows.is_token else {}),
            "latency_ms": v.latency,
            "size_bytes": v.static.get("size_bytes"),
            "num_parameters": v.static.get("num_parameters"),
            "num_parameters_source": v.static.get("num_parameters_source"),
            "memory_bytes": v.static.get("memory_bytes"),
            "process_peak_bytes": v.static.get("process_peak_bytes"),
            "warnings": list(v.warnings),
            "cached": list(v.cached),
            "flags": [],
        }
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
        if v.ok:
            ancestor = _nearest_measured_ancestor(v, by_hash, by_path)
            if ancestor is not None:
                row["measured_parent"] = ancestor.name
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
                      **({"words": rows.num_words} if rows.is_token else {}), **lengths},
        "baseline": base.name if base else None,
        "baseline_note": baseline_note,
        "headline_case": headline,
        "settings": {
            "threads": settings.threads, "runs": settings.runs, "warmup": settings.warmup,
            "batch_sizes": list(settings.batch_sizes), "seq_lens": list(settings.seq_lens),
            "cases": [c.label for c in settings.cases], "max_length": settings.max_length,
            "torch_attention": settings.attention, "eval_batch_size": settings.eval_batch_size,
            "timing": TIMING_METHOD, "memory": MEMORY_METHODS[settings.memory], "memory_mode": settings.memory, "size": SIZE_METHOD,
            "threads_detail": (f"torch.set_num_threads({settings.threads}); ORT intra_op_num_threads="
                               f"{settings.threads}, inter_op 1, allow_spinning=0"),
        },
        "machine": describe_machine(),
        "load_average": _load_average(variants),
        "versions": library_versions(),
        "variants": out_rows,
    }


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
    if getattr(task, "kind", "sequence") != "token":
        return [(m, m, m) for m in task.metrics]
    columns = []
    for metric in task.metrics:
        if metric == "seqeval":
            columns += [("entity_f1", "entity_f1", "entity F1"), ("entity_precision", "entity_precision", "entity precision"),
                        ("entity_recall", "entity_recall", "entity recall")]
        elif metric == "accuracy":
            columns.append(("word_accuracy", "accuracy", "word accuracy"))
        else:
            columns.append((metric, metric, metric))
    return columns


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
            "params": row["num_parameters"],
            "ram_mb": None if row["memory_bytes"] is None else row["memory_bytes"] / 1e6,
            "process_peak_mb": None if row.get("process_peak_bytes") is None else row["process_peak_bytes"] / 1e6,
            "flags": "; ".join(row["flags"]), "path": row["path"],
        })
        table.append(entry)
    return table


def to_markdown(report: dict[str, Any]) -> str:
    s = report["settings"]
    head = report["headline_case"]
    columns = _metric_columns(report)
    token = report["task"].get("kind") == "token"
    words = report["test_rows"].get("words")
    lines = [f"# {report['title']}", ""]
    lines.append(f"Task **{report['task']['name']}** ({len(report['task']['label_names'])} labels"
                 f"{', token classification' if token else ''}), {report['test_rows']['n']} test rows"
                 f"{f' ({words} words)' if words is not None else ''} from "
                 f"{report['test_rows']['source'] or 'the given rows'}. "
                 f"Baseline: **{report['baseline']}**. Headline case: **{head}** (batch/sequence length). "
                 f"Threads: **{s['threads']}**. Machine: {report['machine']}.")
    if report.get("baseline_note"):
        lines += ["", f"> **Baseline:** {report['baseline_note']}."]
    load = report.get("load_average")
    if load and load["cores"] and load["max_1m_while_timing"] > load["cores"]:
        lines += ["", f"> **Busy machine:** load average up to {load['max_1m_while_timing']} on {load['cores']} "
                      "cores while timing. Other processes shared the CPU: absolute timings are inflated and "
                      "spread out (see p90/p99); the interleaved ratios are the figures to trust, and `min` the "
                      "least disturbed one."]
    lines += ["", f"## Summary at {head}", ""]
    header = (["variant", "lineage"] + [name for _, _, name in columns] +
              ["p50 ms", "speed-up", "size MB", "x smaller", "retention", "agrees", "params", "RAM MB", "process MB",
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
                  _fmt(None if entry["agreement"] is None else entry["agreement"] * 100, ".1f", "%"),
                  _params(row["num_parameters"]), _mb(row["memory_bytes"]), _mb(row.get("process_peak_bytes")),
                  describe_target(row["target"]) if row.get("target") else "–",
                  "⚠ " + "; ".join(row["flags"]) if row["flags"] else ""]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines += ["", "## Latency per case (ms per batch; rows/s = throughput)", "",
              "| variant | case | min | p50 | p90 | p99 | mean | rows/s | tokens/row |", "|---|---|--:|--:|--:|--:|--:|--:|--:|"]
    for row in report["variants"]:
        for case in s["cases"]:
            st = (row.get("latency_ms") or {}).get(case)
            if not st:
                continue
            cells = [_fmt(st.get(k), ".2f") for k in ("min", "p50", "p90", "p99", "mean")]
            cells += [_fmt(st.get("throughput_per_s"), ".1f"), _fmt(st.get("mean_tokens_per_row"), ".1f")]
            lines.append(f"| {row['name']} | {case} | " + " | ".join(cells) + " |")
    if token:
        dropped = [r.get("words_dropped") for r in report["variants"] if r.get("words_dropped")]
        accuracy_line = (f"- Metrics: {', '.join(name for _, _, name in columns)} over the words of the test rows, "
                         "each word scored on its first sub-token (words past the truncation length are not "
                         f"scored{f', up to {max(dropped)} per variant' if dropped else ''})"
                         + ("; entity scores by seqeval over the BIO tags" if "seqeval" in report["task"]["metrics"] else "")
                         + f", through `evaluate` (local modules in core/metrics); inputs truncated at {s['max_length']} "
                         "tokens (edge bundles use their own Predictor and truncation). Latency inputs are each "
                         "row's words joined by spaces.")
    else:
        accuracy_line = (f"- Accuracy: {', '.join(name for _, _, name in columns)} through `evaluate` (local modules in core/metrics)"
                         + (f", F1 {report['f1_average']}" if report.get("f1_average") else "")
                         + f"; inputs truncated at {s['max_length']} tokens (edge bundles use their own Predictor).")
    lines += ["", "## How this was measured", "",
              accuracy_line,
              f"- Latency: {s['timing']}; {s['warmup']} warm-up + {s['runs']} timed calls per variant and case; "
              f"`sNNN` = every row padded to NNN tokens, `real` = batches of consecutive test rows (spread over the "
              f"whole test set) padded to the longest in the batch. Speed-up = baseline p50 / variant p50 at {head}.",
              f"- Threads: {s['threads_detail']}. PyTorch attention: {s['torch_attention']}.",
              f"- Memory: {s['memory']}.", f"- Size: {s['size']}; x smaller = baseline size / variant size.",
              "- Retention = variant / baseline on " + _primary_name(report)
              + (f"; agrees = share of {'words' if token else 'test rows'} where the variant predicts the "
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
              "throughput_per_s", "tokens_per_s", "mean_tokens_per_row"]
    writer = csv.DictWriter(buffer, fieldnames=fields, extrasaction="ignore")
    writer.writeheader()
    for row in report["variants"]:
        for case, st in (row.get("latency_ms") or {}).items():
            batch, length = case.split("/")
            writer.writerow({"variant": row["name"], "case": case, "batch_size": batch[1:],
                             "seq_len": length.lstrip("s"), **st})
    return buffer.getvalue()


def _write_atomic(path: Path, data: str | bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if isinstance(data, str):
        tmp.write_text(data)
    else:
        tmp.write_bytes(data)
    os.replace(tmp, path)


def write_report(report: dict[str, Any], out_dir: str | Path, plot: bool = True) -> dict[str, Path]:
    """report.json, report.md, summary.csv, latency.csv and pareto.png in out_dir; their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {"json": out_dir / "report.json", "md": out_dir / "report.md",
             "csv": out_dir / "summary.csv", "latency_csv": out_dir / "latency.csv"}
    _write_atomic(files["json"], json.dumps(report, indent=2, default=float) + "\n")
    _write_atomic(files["md"], to_markdown(report))
    _write_atomic(files["csv"], summary_csv(report))
    _write_atomic(files["latency_csv"], latency_csv(report))
    if plot:
        from shrinkbert.eval.plot import pareto_plot

        files["png"] = out_dir / "pareto.png"
        tmp = out_dir / f".pareto.{os.getpid()}.tmp.png"
        pareto_plot(report, tmp)
        os.replace(tmp, files["png"])
    return files
