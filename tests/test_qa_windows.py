"""QA windows on real SQuAD questions: every gold answer comes back from a window that holds it."""
from pathlib import Path

import pytest

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds.qa_windows import CLS_INDEX, answer_positions, encode_batch, tokenize_windows

SQUAD = Path(__file__).resolve().parents[2] / "shared" / "data" / "squad" / "squad-dev-v1.1.json"
pytestmark = pytest.mark.skipif(not SQUAD.is_file(), reason="../shared/data/squad is absent (it is on CI)")


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from shrinkbert.core.builtin import minilm_path

    return AutoTokenizer.from_pretrained(str(minilm_path()), use_fast=True)


@pytest.fixture(scope="module")
def questions():
    from shrinkbert.core.qa_data import read_qa_file

    rows = read_qa_file(SQUAD)
    return rows.select(range(0, len(rows), 45))  # ~200 questions across every article


def covering_span(offsets, start, end):
    """The text positions a (start, end) token pair covers."""
    return offsets[start][0], offsets[end][1]


@pytest.mark.parametrize("max_length, doc_stride", [(384, 128), (64, 16)])
def test_every_gold_answer_is_recoverable_from_a_window_holding_it(tokenizer, questions, max_length, doc_stride):
    batch = questions.to_dict()
    windows = encode_batch(batch, tokenizer, max_length=max_length, doc_stride=doc_stride)
    by_question, cut, long_contexts = {}, 0, set()
    for window, qid in enumerate(windows["example_id"]):
        by_question.setdefault(qid, []).append(window)
    assert set(by_question) == set(batch["id"])
    for row, qid in enumerate(batch["id"]):
        context = batch["context"][row]
        if len(by_question[qid]) > 3:
            long_contexts.add(qid)
        for text, start in zip(batch["answers"][row]["text"], batch["answers"][row]["answer_start"]):
            end = start + len(text)
            holding = 0
            for window in by_question[qid]:
                offsets = windows["offset_mapping"][window]
                assert len(offsets) <= max_length
                first, last = answer_positions(offsets, start, end)
                if (first, last) == (CLS_INDEX, CLS_INDEX):
                    inside = [o for o in offsets if o is not None]
                    cut += inside[0][0] <= start < inside[-1][1] < end or start < inside[0][0] < end <= inside[-1][1]
                    continue
                holding += 1
                span_start, span_end = covering_span(offsets, first, last)
                # The tokens cover the answer, and no smaller run of tokens would.
                assert span_start <= start and span_end >= end
                assert offsets[first][1] > start and offsets[last][0] < end
                assert text.strip() in context[span_start:span_end]
            # Neighbouring windows share doc_stride tokens, so an answer that long or shorter is wholly in one.
            if len(tokenizer(text, add_special_tokens=False)["input_ids"]) <= doc_stride:
                assert holding >= 1, f"answer {text!r} of {qid} is in no window"
    if max_length == 64:  # small windows: answers cut by an edge and contexts of more than 3 windows occur
        assert cut > 0 and len(long_contexts) > 10


def test_training_positions_point_at_cls_when_the_answer_is_outside(tokenizer, questions):
    batch = questions.select(range(40)).to_dict()
    windows = encode_batch(batch, tokenizer, max_length=64, doc_stride=16)
    ids = list(batch["id"])
    for window, qid in enumerate(windows["example_id"]):
        row = ids.index(qid)
        start, end = windows["start_positions"][window], windows["end_positions"][window]
        answer = batch["answers"][row]
        if (start, end) == (CLS_INDEX, CLS_INDEX):
            continue
        offsets = windows["offset_mapping"][window]
        first = answer["answer_start"][0]
        assert offsets[start][0] <= first and offsets[end][1] >= first + len(answer["text"][0])
        assert windows["input_ids"][window][0] == tokenizer.cls_token_id
        # the question comes first and is never truncated
        sep = windows["input_ids"][window].index(tokenizer.sep_token_id)
        assert tokenizer.decode(windows["input_ids"][window][1:sep]) == tokenizer.decode(
            tokenizer(batch["question"][row].lstrip(), add_special_tokens=False)["input_ids"])
    assert any(s == CLS_INDEX for s in windows["start_positions"])


def test_stride_must_be_below_max_length(tokenizer):
    with pytest.raises(ShrinkbertError, match="doc_stride"):
        tokenize_windows(tokenizer, ["q"], ["c"], max_length=64, doc_stride=64)
