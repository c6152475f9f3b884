"""Accuracy-aware int8: keep in fp32 the fewest modules needed to stay within a tolerance.

1. Score fp32 and fully-int8 on validation rows. 2. For each module group, quantize everything
except that group: the accuracy it wins back (and how much closer its logits get to fp32) is its
sensitivity. 3. Keep the most sensitive groups in fp32 one by one until the accuracy loss is at
most the tolerance. Groups are module names ("encoder.layer.3.attention"), never node names.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

from shrinkbert.compress.common import accuracy


def search(src: Path, groups: dict[str, list[str]], base_exclude: list[str], quantize: Callable[[Path, list[str]], Path],
           evaluate: Callable[[Path], np.ndarray], labels: list[int], fp32_logits: np.ndarray,
           tolerance_points: float) -> dict:
    """Returns {table, kept_fp32, accuracy_int8, met, steps}; `quantize(dst, exclude_nodes)` and
    `evaluate(path) -> logits` are given by the stage (they hold its quantization settings and rows)."""
    acc_fp32 = accuracy(fp32_logits, labels)

    def measure(keep: list[str], dst: Path) -> tuple[float, float]:
        nodes = list(base_exclude) + [n for g in keep for n in groups[g]]
        logits = evaluate(quantize(dst, nodes))
        return accuracy(logits, labels), float(np.abs(logits - fp32_logits).mean())

    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        acc_all, err_all = measure([], work / "all.onnx")
        table = []
        for group in groups:
            acc_g, err_g = measure([group], work / "probe.onnx")
            table.append({"module": group, "accuracy_when_kept_fp32": round(acc_g, 5),
                          "accuracy_gain_points": round(100 * (acc_g - acc_all), 3),
                          "mean_abs_logit_diff_when_kept_fp32": round(err_g, 6),
                          "logit_diff_reduction": round(err_all - err_g, 6)})
        table.sort(key=lambda r: (-r["accuracy_gain_points"], -r["logit_diff_reduction"]))
        kept: list[str] = []
        acc, steps = acc_all, [{"kept_fp32": [], "accuracy": round(acc_all, 5)}]
        for row in table:
            if 100 * (acc_fp32 - acc) <= tolerance_points:
                break
            kept.append(row["module"])
            acc, _ = measure(kept, work / "step.onnx")
            steps.append({"kept_fp32": list(kept), "accuracy": round(acc, 5)})
    return {"table": table, "kept_fp32": kept, "accuracy_fp32": acc_fp32, "accuracy_all_int8": acc_all,
            "accuracy_int8": acc, "mean_abs_logit_diff_all_int8": err_all,
            "met": 100 * (acc_fp32 - acc) <= tolerance_points, "steps": steps}
