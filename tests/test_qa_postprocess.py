"""QA postprocessing on hand-made logits, and the SQuAD metric against hand-computed values."""
import math
import re
import subprocess
import sys

import numpy as np
import pytest

from shrinkbert.core.metrics import load_metric
from shrinkbert.core.metrics.squad.compute_score import compute_score, f1, normalize_answer
from shrinkbert.core.kinds.edge.qa_edge import answer_question, best_null_threshold, window_spans

CONTEXT = "Paris is the capital of France and its largest city"
# Window tokens: [CLS] what is it ? [SEP] then one token per context word, [SEP]. Offsets None outside the context.
CONTEXT_OFFSETS = [match.span() for match in re.finditer(r"\S+", CONTEXT)]
OFFSETS = [None] * 5 + CONTEXT_OFFSETS + [None]


def logits(peaks: dict, size=len(OFFSETS), base=0.0):
    values = np.full(size, base)
    for position, value in peaks.items():
        values[position] = value
    return values


def test_best_valid_span_is_cut_from_the_context():
    start, end = logits({5 + 5: 5.0, 5 + 2: 1.0}), logits({5 + 5: 4.0, 5 + 6: 1.0})  # "France" best
    answer = answer_question([(start, end, OFFSETS)], CONTEXT)
    assert answer["text"] == "France" and CONTEXT[answer["start"]:answer["end"]] == "France"
    assert 0.5 < answer["score"] <= 1.0


def test_end_before_start_and_spans_in_the_question_are_refused():
    start = logits({1: 9.0, 5 + 3: 2.0})  # the highest start is a question token
    end = logits({2: 9.0, 5 + 1: 3.0, 5 + 4: 1.0})  # the highest end is in the question, the next before the start
    answer = answer_question([(start, end, OFFSETS)], CONTEXT)
    assert answer["text"] == "capital of"  # start 8 ("capital"), end 9 ("of")
    assert all(OFFSETS[i] is not None for i in (8, 9))


def test_length_limit():
    start, end = logits({5: 5.0}), logits({14: 5.0, 6: 1.0})  # "Paris" ... "city": 10 tokens
    assert answer_question([(start, end, OFFSETS)], CONTEXT)["text"] == CONTEXT
    limited = answer_question([(start, end, OFFSETS)], CONTEXT, max_answer_length=3)
    assert limited["text"] == "Paris is"  # start 5 + end 6 (6.0) beats any 3-token span ending at "city" (5.0)
    spans = window_spans(start, end, OFFSETS, max_answer_length=3)
    assert spans and all(len(CONTEXT[s:e].split()) <= 3 for _, s, e in spans)


def test_best_span_over_all_windows():
    weak = (logits({5: 1.0}), logits({5: 1.0}), OFFSETS)
    strong = (logits({5 + 5: 3.0}), logits({5 + 5: 3.0}), OFFSETS)
    assert answer_question([weak, strong], CONTEXT)["text"] == "France"
    assert answer_question([strong, weak], CONTEXT)["text"] == "France"


def test_no_answer_against_the_null_threshold():
    start, end = logits({0: 4.0, 5 + 5: 2.0}), logits({0: 4.0, 5 + 5: 2.0})  # null 8 vs span 4
    v1 = answer_question([(start, end, OFFSETS)], CONTEXT)
    assert v1["text"] == "France" and v1["null_score_diff"] == -math.inf
    v2 = answer_question([(start, end, OFFSETS)], CONTEXT, version_2_with_negative=True)
    assert v2["text"] == "" and v2["start"] is None and v2["null_score_diff"] == pytest.approx(4.0)
    lenient = answer_question([(start, end, OFFSETS)], CONTEXT, version_2_with_negative=True, null_threshold=5.0)
    assert lenient["text"] == "France"


def test_null_threshold_chosen_to_maximise_f1():
    diffs = [-3.0, -1.0, 0.5, 2.0, 4.0]
    answer_f1 = [1.0, 1.0, 1.0, 0.0, 0.0]
    has_answer = [True, True, True, False, False]
    threshold = best_null_threshold(diffs, answer_f1, has_answer)
    assert 0.5 <= threshold < 2.0  # abstain exactly on the two with no answer
    assert best_null_threshold([1.0, 2.0], [1.0, 1.0], [True, True]) >= 2.0  # never abstain


def test_postprocess_imports_numpy_only():
    code = ("import sys; sys.modules['torch'] = None; sys.modules['transformers'] = None; "
            "import importlib.util as u; s = u.spec_from_file_location('p', 'core/kinds/edge/qa_edge.py'); "
            "m = u.module_from_spec(s); s.loader.exec_module(m); print(sorted(k for k in sys.modules if k.startswith(('torch', 'transformers', 'shrinkbert'))))")
    from pathlib import Path

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1], timeout=120)
    assert out.stdout.strip() in ("[]", "['torch', 'transformers']")


# ---------------------------------------------------------------------------------------------
# The SQuAD metric


def test_normalisation_and_f1_by_hand():
    assert normalize_answer("The  Normans!") == "normans"
    assert normalize_answer("an  apple, a pear") == "apple pear"
    # "denver broncos" vs "broncos": precision 1/2, recall 1/1 -> F1 2/3
    assert f1("Denver Broncos", "the Broncos") == pytest.approx(2 / 3)
    assert f1("", "") == 1.0 and f1("", "x") == 0.0


def test_metric_module_hand_computed():
    metric = load_metric("squad")
    references = [{"id": "a", "answers": {"text": ["Denver Broncos", "Broncos"], "answer_start": [0, 7]}},
                  {"id": "b", "answers": {"text": ["in 1066"], "answer_start": [3]}}]
    predictions = [{"id": "a", "prediction_text": "the Denver Broncos"},  # EM 1 (article dropped), F1 1
                   {"id": "b", "prediction_text": "1066 battle"}]  # EM 0, F1: 1 common, P 1/2, R 1/2 -> 1/2
    result = metric.compute(predictions=predictions, references=references)
    assert result["exact_match"] == pytest.approx(50.0) and result["f1"] == pytest.approx(75.0)
    assert "HasAns_f1" not in result


def test_metric_v2_breakdown():
    predicted = {"a": "Broncos", "b": "", "c": "something", "d": ""}
    gold = {"a": ["Broncos"], "b": [], "c": [], "d": ["Paris"]}
    result = compute_score(predicted, gold)
    assert result["HasAns_total"] == 2 and result["NoAns_total"] == 2
    assert result["HasAns_exact"] == pytest.approx(50.0) and result["NoAns_exact"] == pytest.approx(50.0)
    assert result["exact_match"] == pytest.approx(50.0) and result["f1"] == pytest.approx(50.0)
    with pytest.raises(ValueError, match="no prediction for question 'x'"):
        compute_score({}, {"x": ["y"]})
