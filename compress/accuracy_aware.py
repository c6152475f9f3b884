"""Accuracy-aware int8: keep in fp32 the fewest modules needed to stay within a tolerance.

1. Score fp32 and fully-int8 on validation rows. 2. For each module group, quantize everything
except that group: the accuracy it wins back (and how much closer its logits get to fp32) is its
sensitivity. 3. Keep the most sensitive groups in fp32 one by one until the accuracy loss is at
most the tolerance and the kind's own int8 checks hold (`holds`: an embedding's vectors must keep their
directions, a mean cosine with fp32's, or an index built with one is searched badly with the other).
Groups are module names ("encoder.layer.3.attention"), never node names.

The loss is judged on every validation row given (the stage passes the whole split), with its
statistical margin: the paired standard error of the per-row difference in correctness between
fp32 and int8 (se = std(c_fp32 - c_int8) / sqrt(n)). The tolerance is met when
loss + margin_z * se <= tolerance (margin_z 0: the point estimate alone).

What is scored is a `Judge`: a classifier's accuracy on labelled rows (`by_labels`, the default
when the search is given labels), or any other score of the outputs with its own loss and margin
(scored pairs: Spearman, core/kinds/embedding.PairScores, through `judge_for`).
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from shrinkbert.compress.common import accuracy, unit_scores
from shrinkbert.core.errors import ShrinkbertError


def loss_with_margin(fp32_logits: np.ndarray, int8_logits: np.ndarray, labels: list[int]) -> tuple[float, float]:
    """(accuracy loss, its paired standard error), both in points, over the same rows (a QA task:
    per-question F1, so the search is judged on F1)."""
    diff = unit_scores(fp32_logits, labels) - unit_scores(int8_logits, labels)
    n = len(diff)
    se = float(diff.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0
    return 100 * float(diff.mean()), 100 * se


@dataclass(frozen=True)
class Judge:
    """What the search holds within the tolerance: `score(outputs)` as a fraction (accuracy, or
    Spearman / 100) and `loss(fp32_outputs, int8_outputs)` -> (points lost, its standard error in
    points); `rows`: how many rows (or pairs) it is judged on."""
    score: Callable[[np.ndarray], float | None]
    loss: Callable[[np.ndarray, np.ndarray], tuple[float, float]]
    rows: int
    name: str = "accuracy"  # what `score` is, for the manifest and messages
    # what ranks the modules: "score" (the score each wins back, then the outputs' drift) or "drift" (how
    # much nearer fp32's its outputs come: vectors, whose every direction an index searches)
    rank_by: str = "score"


def by_labels(labels: Sequence[int]) -> Judge:
    """Accuracy on labelled rows (a QA task: per-question F1), with the paired per-row margin."""
    return Judge(lambda outputs: accuracy(outputs, labels),
                 lambda fp32, int8: loss_with_margin(fp32, int8, labels), len(labels))


def judge_for(labels) -> Judge:
    """The Judge the labels ask for: their own score and margin where they carry them (scored pairs:
    Spearman, core/kinds/embedding.PairScores), else accuracy with the paired per-row margin."""
    if hasattr(labels, "drop_with_margin"):
        return Judge(labels.score_of, labels.drop_with_margin, len(labels), getattr(labels, "judged_by", "score"),
                     rank_by="drift")
    return by_labels(labels)


def search(src: Path, groups: dict[str, list[str]], base_exclude: list[str], quantize: Callable[[Path, list[str]], Path],
           evaluate: Callable[[Path], np.ndarray], labels: Sequence[int] | Judge, fp32_logits: np.ndarray,
           tolerance_points: float, margin_z: float = 0.0,
           holds: Callable[[np.ndarray, np.ndarray], bool] | None = None) -> dict:
    """Returns {table, kept_fp32, accuracy_int8, met, steps, loss_points, se_points, ...} ("accuracy"
    is the judge's score); `quantize(dst, exclude_nodes)` and `evaluate(path) -> outputs` are given by
    the stage (they hold its quantization settings and rows); `labels`: the rows' labels, or a Judge.
    `met` is False when the tolerance holds only with every group kept fp32 (nothing left to
    quantize) or not even then; with `holds(fp32_outputs, int8_outputs)`, it must hold too."""
    judge = labels if isinstance(labels, Judge) else judge_for(labels)
    acc_fp32 = judge.score(fp32_logits)
    margins: dict[str, tuple[float, float]] = {}

    def measure(keep: list[str], dst: Path) -> tuple[float, float]:
        nodes = list(base_exclude) + [n for g in keep for n in groups[g]]
        logits = evaluate(quantize(dst, nodes))
        margins["last"] = judge.loss(fp32_logits, logits)
        margins["holds"] = holds is None or holds(fp32_logits, logits)
        return judge.score(logits), float(np.abs(logits - fp32_logits).mean())

    def within() -> bool:
        loss, se = margins["last"]
        return loss + margin_z * se <= tolerance_points and margins["holds"]

    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        acc_all, err_all = measure([], work / "all.onnx")
        all_loss, all_se, all_holds = *margins["last"], margins["holds"]
        met_all = within()
        table = []
        for group in groups:
            acc_g, err_g = measure([group], work / "probe.onnx")
            table.append({"module": group, "accuracy_when_kept_fp32": round(acc_g, 5),
                          "accuracy_gain_points": round(100 * (acc_g - acc_all), 3),
                          "mean_abs_logit_diff_when_kept_fp32": round(err_g, 6),
                          "logit_diff_reduction": round(err_all - err_g, 6)})
        if judge.rank_by == "drift":
            table.sort(key=lambda r: (-r["logit_diff_reduction"], -r["accuracy_gain_points"]))
        else:
            table.sort(key=lambda r: (-r["accuracy_gain_points"], -r["logit_diff_reduction"]))
        kept: list[str] = []
        margins["last"], margins["holds"] = (all_loss, all_se), all_holds
        acc, steps = acc_all, [{"kept_fp32": [], "accuracy": round(acc_all, 5),
                                "loss_points": round(all_loss, 3), "se_points": round(all_se, 3)}]
        met = met_all
        for row in table:
            if met:
                break
            kept.append(row["module"])
            acc, _ = measure(kept, work / "step.onnx")
            met = within()
            steps.append({"kept_fp32": list(kept), "accuracy": round(acc, 5),
                          "loss_points": round(margins["last"][0], 3), "se_points": round(margins["last"][1], 3)})
    loss, se = margins["last"]
    everything_kept = bool(groups) and len(kept) == len(groups)
    return {"table": table, "kept_fp32": kept, "accuracy_fp32": acc_fp32, "accuracy_all_int8": acc_all,
            "accuracy_int8": acc, "mean_abs_logit_diff_all_int8": err_all,
            "met": met and not everything_kept, "everything_kept": everything_kept,
            "loss_points": round(loss, 3), "se_points": round(se, 3), "margin_z": margin_z,
            "bound_points": round(loss + margin_z * se, 3), "rows": judge.rows, "steps": steps}


def require_met(search: dict, tolerance: float, margin_z: float, allow_unmet: bool, judged_on: str = "validation rows",
                margin: str = "paired se") -> None:
    """One error line when the search could not meet the tolerance (unless --allow-unmet)."""
    if search["met"] or allow_unmet:
        return
    how = ("only by keeping every module float (nothing left in int8)" if search["everything_kept"]
           else "not even with every module kept float")
    first = search["steps"][0]
    raise ShrinkbertError(
        f"tolerance {tolerance} pt cannot be met on {search['rows']} {judged_on}: it holds {how}; "
        f"all-int8 loses {first['loss_points']} pt ({margin} {first['se_points']} pt, margin_z {margin_z}). "
        "Raise --tolerance, lower --margin-z, or pass --allow-unmet")
