"""Paired differences (eval/stats.py) on hand-made predictions whose answers are worked out here
independently (binomial sums, the normal approximation), and the report's difference columns."""
from __future__ import annotations

import math

import numpy as np
import pytest

from shrinkbert.core.data.tasks import Task
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.eval.stats import compare, difference_text, mcnemar, mean_sd, paired_bootstrap

TASK = Task("tiny", ("negative", "positive"), metrics=("accuracy",))


def _pairs(both_right: int, a_only: int, b_only: int, both_wrong: int) -> tuple[np.ndarray, np.ndarray]:
    a = [1] * both_right + [1] * a_only + [0] * b_only + [0] * both_wrong
    b = [1] * both_right + [0] * a_only + [1] * b_only + [0] * both_wrong
    return np.array(a, bool), np.array(b, bool)


def test_mcnemar_exact_and_mid_p_equal_the_binomial_sums():
    a, b = _pairs(5, 1, 9, 3)
    result = mcnemar(a, b)
    # 10 discordant rows split 1/9: exact two-sided p = 2 * P(X <= 1) = 2 * (1 + 10) / 1024;
    # mid-p = 2 * (P(X <= 1) - P(X = 1) / 2) = 2 * (1 + 5) / 1024
    assert (result["a_only"], result["b_only"]) == (1, 9)
    assert result["p_exact"] == pytest.approx(22 / 1024)
    assert result["p_mid"] == pytest.approx(12 / 1024)
    assert mcnemar(*_pairs(5, 3, 3, 0))["p_mid"] == pytest.approx(1.0)  # an even split: no evidence
    assert mcnemar(*_pairs(7, 0, 0, 2)) == {"a_only": 0, "b_only": 0, "p_exact": 1.0, "p_mid": 1.0}


def test_bootstrap_interval_matches_the_normal_approximation():
    a, b = _pairs(1700, 150, 100, 50)
    diff, low, high = paired_bootstrap(a, b, seed=1)
    n = a.size
    mean = (150 - 100) / n
    se = math.sqrt(((150 + 100) / n - mean ** 2) / n)
    assert diff == pytest.approx(0.025)
    assert low == pytest.approx(mean - 1.96 * se, abs=0.002)
    assert high == pytest.approx(mean + 1.96 * se, abs=0.002)
    assert paired_bootstrap(a, b, seed=1) == (diff, low, high)  # seeded: the same interval again


def test_identical_and_constant_differences_have_a_zero_width_interval():
    a, b = _pairs(10, 0, 0, 5)
    assert paired_bootstrap(a, b) == (0.0, 0.0, 0.0)
    result = compare(a, b)
    assert not result.significant and result.text() == "+0.0 [+0.0, +0.0] n.s."
    assert paired_bootstrap([1, 1, 1], [0, 0, 0]) == (1.0, 1.0, 1.0)


def test_compare_flags_a_difference_inside_the_noise_and_one_outside():
    small = compare(*_pairs(900, 12, 10, 85))  # +0.2 points on 1,007 rows
    assert not small.significant and small.text().endswith("n.s.")
    assert small.low < 0 < small.high
    large = compare(*_pairs(900, 60, 10, 37))
    assert large.significant and large.low > 0 and "p=<0.001" in large.text()


def test_words_move_with_their_sentence():
    # 40 sentences of 10 words: A gets whole sentences right or wrong, B is right on 5 of every 10
    # words. Resampling sentences sees 40 units, not 400 independent words: a wider interval.
    per_sentence = np.repeat(np.arange(40) % 2 == 0, 10)
    b = np.tile(np.arange(10) < 5, 40)
    counts = [10] * 40
    clustered = compare(per_sentence, b, row_counts=counts)
    independent = compare(per_sentence, b)
    assert clustered.difference == pytest.approx(independent.difference) == pytest.approx(0.0)
    assert clustered.n == 40 and independent.n == 400
    assert clustered.high - clustered.low > 1.5 * (independent.high - independent.low)
    with pytest.raises(ShrinkbertError, match="add up to"):
        compare(per_sentence, b, row_counts=[10] * 39)


def test_mean_sd():
    assert mean_sd([0.9, 0.92, None, 0.94]) == pytest.approx((0.92, 0.02))
    assert mean_sd([0.5]) == (0.5, 0.0) and mean_sd([]) == (None, None)


def test_difference_text():
    assert difference_text(None) == "–"
    assert difference_text({"vs": "x", "unavailable": "why"}) == "–"
    record = {"difference": -0.003, "low": -0.011, "high": 0.005, "significant": False, "p_mid": 0.4}
    assert difference_text(record) == "-0.3 [-1.1, +0.5] n.s."


def _variant(name, predictions, manifest=None, content_hash=""):
    from shrinkbert.eval.lineage import lineage
    from shrinkbert.eval.measure import Variant

    v = Variant(name, f"/x/{name}", kind="onnx", manifest=manifest or {}, content_hash=content_hash)
    v.static = {"size_bytes": 100, "num_parameters": 10, "memory_bytes": 1}
    labels = [i % 2 for i in range(len(predictions))]
    v.accuracy = {"metrics": {"accuracy": float(np.mean(np.equal(predictions, labels)))}, "n": len(predictions),
                  "predictions": list(predictions)}
    v.latency = {"b1/s16": {"p50": 1.0}}
    v.lineage = lineage(v.path, manifest) if manifest else {}
    return v


def test_report_gives_the_paired_difference_to_baseline_and_parent():
    from shrinkbert.eval.measure import Settings
    from shrinkbert.eval.report import build_report, summary_csv, to_markdown
    from shrinkbert.eval.rows import from_lists

    n = 400
    labels = [i % 2 for i in range(n)]
    rows = from_lists(TASK, [f"row {i}" for i in range(n)], labels)
    teacher = labels.copy()                                   # all right
    parent = [1 - y if i < 40 else y for i, y in enumerate(labels)]  # 40 wrong: -10 points
    child = [1 - y if i < 42 else y for i, y in enumerate(labels)]   # 2 more wrong than its parent
    variants = [_variant("teacher", teacher, {"stage": "finetune"}),
                _variant("parent", parent, {"stage": "export", "parents": []}, "h-parent"),
                _variant("child", child, {"stage": "quantize", "parents": [{"path": "/x/parent", "hash": "h-parent"}]})]
    report = build_report(variants, rows, Settings(batch_sizes=[1], seq_lens=["16"], threads=1))
    by_name = {r["name"]: r for r in report["variants"]}
    assert "vs_baseline" not in by_name["teacher"]
    to_teacher, to_parent = by_name["child"]["vs_baseline"], by_name["child"]["vs_parent"]
    assert to_teacher["difference"] == pytest.approx(-42 / n) and to_teacher["significant"]
    assert (to_teacher["a_only"], to_teacher["b_only"]) == (0, 42)
    assert to_parent["vs"] == "parent" and to_parent["difference"] == pytest.approx(-2 / n)
    assert not to_parent["significant"] and to_parent["p_exact"] == pytest.approx(0.5)  # 2 of 2: 2 * 1/4
    markdown = to_markdown(report)
    assert "## Differences on the same test rows" in markdown
    line = next(x for x in markdown.splitlines() if x.startswith("| child | parent |"))
    assert "| -0.5 [" in line and "n.s." in line
    assert "diff_vs_baseline_pts" in summary_csv(report).splitlines()[0]


def test_report_says_why_when_rows_differ():
    from shrinkbert.eval.measure import Settings
    from shrinkbert.eval.report import build_report
    from shrinkbert.eval.rows import from_lists

    rows = from_lists(TASK, ["a", "b", "c", "d"], [0, 1, 0, 1])
    variants = [_variant("teacher", [0, 1, 0, 1], {"stage": "finetune"}), _variant("short", [0, 1])]
    row = build_report(variants, rows, Settings(batch_sizes=[1], seq_lens=["16"], threads=1))["variants"][1]
    assert "unavailable" in row["vs_baseline"]


def test_compare_runs_pairs_the_seed_means_on_the_same_rows():
    from shrinkbert.eval.stats import compare_runs

    a, b = _pairs(300, 30, 0, 70)
    # two seeds of arm A: the one above and one that equals B; their mean is 15 rows better than B
    result = compare_runs([a, b], [b])
    assert result.difference == pytest.approx(15 / 400) and result.significant
    assert compare_runs([a, a], [a]).text() == "+0.0 [+0.0, +0.0] n.s."
    with pytest.raises(ShrinkbertError, match="same rows"):
        compare_runs([a], [b[:10]])


def test_frontier_gives_retention_differences_with_their_interval():
    from shrinkbert.frontier import add_paired_differences, format_table

    teacher, _ = _pairs(380, 0, 0, 20)  # 0.95 accuracy
    near = [teacher.copy(), teacher.copy()]
    near[0][:3] = False                  # seed 0 loses 3 rows, seed 1 none: inside the noise
    far = [teacher.copy() for _ in range(3)]
    for run in far:
        run[:40] = False                 # every seed loses 40 rows: -10 accuracy points
    rows_out = [{"speedup_target": 4.0, "given": None, "outcomes": near},
                {"speedup_target": None, "given": "2L-H160", "outcomes": far}]
    add_paired_differences(rows_out, list(teacher), 0.95, "teacher")
    assert not rows_out[0]["vs_reference"]["significant"]
    assert rows_out[0]["vs_reference"]["difference"] == pytest.approx(-1.5 / 400 / 0.95)
    assert rows_out[1]["vs_reference"]["difference"] == pytest.approx(-40 / 400 / 0.95)
    assert rows_out[1]["vs_reference"]["high"] < 0
    add_paired_differences(rows_out, list(teacher), 0.95, "2L-H160")
    assert rows_out[0]["vs_reference"]["vs"] == "2L-H160" and rows_out[0]["vs_reference"]["low"] > 0
    assert "vs_reference" not in rows_out[1]  # the reference itself
    with pytest.raises(ShrinkbertError, match="names no point"):
        add_paired_differences(rows_out, list(teacher), 0.95, "9x")
    shape = {"layers": 2, "hidden": 160, "heads": 5, "intermediate": 640}
    figures = {"accuracy": 0.95, "p50_ms": 10.0, "size_bytes": 1e8}
    table = {"runtime": "onnx-int8", "test_rows": 400, "seq_len": 128, "threads": 2, "compare_to": "2L-H160",
             "teacher": figures, "teacher_int8": figures,
             "points": [{**r, "shape": shape, "seeds": 2, "retention_mean": 0.99, "retention_sd": 0.01,
                         "accuracy_mean": 0.94, "p50_ms": 1.0, "speedup_vs_torch": 10.0,
                         "speedup_vs_teacher_int8": 3.0, "size_mb": 10.0, "x_smaller": 10.0} for r in rows_out]}
    text = format_table(table)
    assert "retention vs 2L-H160 [95% CI]" in text and "| +10.1 [" in text


def test_report_compares_token_variants_word_by_word_with_sentences_resampled():
    from shrinkbert.eval.measure import Settings, Variant
    from shrinkbert.eval.report import build_report
    from shrinkbert.eval.rows import from_words

    task = Task("tags", ("O", "X"), metrics=("accuracy",), kind="token")
    rows = from_words(task, [["a", "b", "c"]] * 40, [[0, 1, 0]] * 40)

    def variant(name, correct, counts, stage=None):
        v = Variant(name, f"/x/{name}", kind="onnx", manifest={"stage": stage} if stage else {})
        v.static = {"size_bytes": 1, "num_parameters": 1, "memory_bytes": 1}
        v.accuracy = {"metrics": {"accuracy": sum(correct) / len(correct)}, "n": 40, "words": len(correct),
                      "predictions": [0] * len(correct), "word_counts": counts, "correct": correct}
        v.latency = {"b1/s16": {"p50": 1.0}}
        return v

    counts = [3] * 40
    teacher = variant("teacher", [1] * 120, counts, "finetune")
    student = variant("student", [0] * 30 + [1] * 90, counts)  # the first 10 sentences wholly wrong
    shorter = variant("shorter", [1] * 80, [2] * 40)            # scored other words: no comparison
    report = build_report([teacher, student, shorter], rows, Settings(batch_sizes=[1], seq_lens=["16"], threads=1))
    to_teacher = report["variants"][1]["vs_baseline"]
    assert to_teacher["metric"] == "word accuracy" and to_teacher["n"] == 40
    assert to_teacher["difference"] == pytest.approx(-0.25) and to_teacher["b_only"] == 30
    assert "different words" in report["variants"][2]["vs_baseline"]["unavailable"]
