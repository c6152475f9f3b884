"""The QA bundle's side of core/kinds/edge/qa_edge.py: `tokenizers` windows equal the kit's, and
answers come back from a model's start/end logits without torch or transformers."""
from pathlib import Path

import numpy as np
import pytest

from shrinkbert.core.kinds.edge import qa_edge

SQUAD = Path(__file__).resolve().parents[2] / "shared" / "data" / "squad" / "squad-dev-v1.1.json"
pytestmark = pytest.mark.skipif(not SQUAD.is_file(), reason="../shared/data/squad is absent (it is on CI)")
MAX_LENGTH = 96


@pytest.fixture(scope="module")
def questions():
    from shrinkbert.core.qa_data import read_qa_file

    rows = read_qa_file(SQUAD)
    return rows.select(range(0, len(rows), 300))


@pytest.fixture(scope="module")
def minilm_dir() -> Path:
    from shrinkbert.core.builtin import minilm_path

    return Path(minilm_path())


class OracleSession:
    """An ONNX session stand-in whose start/end logits peak at the gold answer's tokens."""

    def __init__(self, spans):
        self.spans = spans  # per call: the (start, end) token of each window, or None

    def get_outputs(self):
        return [type("Output", (), {"name": name})() for name in ("start_logits", "end_logits")]

    def run(self, _, feed):
        windows, width = feed["input_ids"].shape
        starts, ends = np.zeros((windows, width)), np.zeros((windows, width))
        for i, span in enumerate(self.spans.pop(0)):
            starts[i, span[0] if span else 0] = ends[i, span[1] if span else 0] = 10.0
        return [starts, ends]


def test_bundle_windows_equal_the_kits(questions, minilm_dir):
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    from shrinkbert.core.kinds.qa import default_doc_stride as doc_stride
    from shrinkbert.core.kinds.qa_windows import encode_batch

    fast = AutoTokenizer.from_pretrained(str(minilm_dir), use_fast=True)
    raw = Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    raw.no_padding()
    kit = encode_batch(questions.to_dict(), fast, MAX_LENGTH, doc_stride(MAX_LENGTH), with_positions=False)
    bundle_ids, bundle_offsets = [], []
    for question, context in zip(questions["question"], questions["context"]):
        for encoding in qa_edge.encode_windows(raw, question, context, MAX_LENGTH):
            bundle_ids.append(encoding.ids)
            bundle_offsets.append(qa_edge.window_offsets(encoding))
    assert bundle_ids == kit["input_ids"]
    assert bundle_offsets == [[tuple(o) if o else None for o in offsets] for offsets in kit["offset_mapping"]]
    assert len(bundle_ids) > len(questions)  # some contexts needed several windows


def test_answer_from_logits_without_torch(questions, minilm_dir):
    from tokenizers import Tokenizer

    from shrinkbert.core.kinds.qa_windows import answer_positions

    raw = Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    spans = []
    for question, context, answers in zip(questions["question"], questions["context"], questions["answers"]):
        start = answers["answer_start"][0]
        windows = qa_edge.encode_windows(raw, question, context, MAX_LENGTH)
        positions = [answer_positions(qa_edge.window_offsets(w), start, start + len(answers["text"][0])) for w in windows]
        spans.append([p if p != (0, 0) else None for p in positions])
    predictor = type("P", (), {})()
    predictor.tokenizer, predictor.max_length = raw, MAX_LENGTH
    predictor.input_names = ["input_ids", "attention_mask", "token_type_ids"]
    predictor.session = OracleSession(list(spans))
    found = qa_edge.predict(predictor, list(questions["question"]), list(questions["context"]))
    for result, context, answers in zip(found, questions["context"], questions["answers"]):
        assert context[result["start"]:result["end"]] == result["text"]
        assert answers["text"][0] in result["text"] and 0 < result["score"] <= 1
