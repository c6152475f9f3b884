"""Students that are not transformers (--student bilstm, cnn, bag): a text's logits are the same alone and
in a padded batch, pairs are read as two texts, and each goes distill -> export -> int8 -> bundle with its
outputs held to the PyTorch student's; the options they cannot take are refused in one line."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from fixtures import make_tiny_bert, run_cli, write_tiny_csv

ARCHITECTURES = ("bilstm", "cnn", "bag")
TEXTS = ["a warm and clever film", "the plot was dull", "fine", "an utterly tedious and overlong mess of a film"]


def tiny_compact(architecture: str, pair: bool = False, layers: int = 1, cross_attention: bool = False,
                 composition: bool = False):
    from transformers import AutoModelForSequenceClassification

    from shrinkbert.core.compact import build_config

    torch.manual_seed(0)
    pooling = {"cnn": {"pooling": "max-mean"}}.get(architecture, {})  # the others: their own default
    config = build_config(architecture, vocab_size=64, embedding_dim=12, hidden_size=8, num_hidden_layers=layers,
                          num_labels=3, pair=pair, sep_token_id=3, pad_token_id=0, cross_attention=cross_attention,
                          composition=composition, **pooling)
    return AutoModelForSequenceClassification.from_config(config).eval()


@pytest.mark.parametrize("architecture, pair, cross_attention, composition", [
    *((a, p, False, False) for a in ARCHITECTURES for p in (False, True)),
    *((a, True, True, c) for a in ("bilstm", "cnn") for c in (False, True))])
def test_a_row_gives_the_same_logits_alone_and_in_a_padded_batch(architecture, pair, cross_attention, composition):
    model = tiny_compact(architecture, pair=pair, layers=2 if architecture == "bilstm" else 1,
                         cross_attention=cross_attention, composition=composition)
    rows = [[2, 10, 11, 12, 3, 20, 21, 3], [2, 13, 3, 22, 3], [2, 14, 15, 3, 3]]  # the last: an empty second text
    width = max(map(len, rows))
    ids = torch.tensor([row + [0] * (width - len(row)) for row in rows])
    mask = (torch.arange(width)[None] < torch.tensor([len(r) for r in rows])[:, None]).long()
    with torch.no_grad():
        batched = model(input_ids=ids, attention_mask=mask).logits
        alone = torch.cat([model(input_ids=torch.tensor([row])).logits for row in rows])
    assert torch.allclose(batched, alone, atol=1e-5), (batched - alone).abs().max()
    if pair:  # the second text is read: changing it changes the logits
        swapped = torch.tensor([[2, 10, 11, 12, 3, 30, 31, 3]])
        with torch.no_grad():
            assert not torch.allclose(model(input_ids=swapped).logits, alone[:1], atol=1e-4)


def test_cross_attention_aligns_each_token_with_the_other_texts_tokens_only():
    from shrinkbert.core.compact.base import aligned_with_other_text, text_masks

    ids = torch.tensor([[2, 10, 11, 3, 20, 3, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 0]])
    first, second = text_masks(ids, mask, 3)
    states = torch.randn(1, 7, 4)
    aligned = aligned_with_other_text(states, first, second)
    # the first text: [CLS] 10 11 [SEP]; the second: 20 (its closing separator is neither's)
    assert all(torch.allclose(aligned[0, i], states[0, 4]) for i in range(4))  # one key to read: itself
    first_text = [0, 1, 2, 3]
    weights = torch.softmax(states[0, first_text] @ states[0, 4] / 2, 0)  # scores scaled by sqrt(4)
    assert torch.allclose(aligned[0, 4], weights @ states[0, first_text], atol=1e-6)
    assert not aligned[0, [5, 6]].any()  # the closing separator and the pad read nothing


@pytest.mark.parametrize("architecture", ["bilstm", "cnn"])
def test_composition_adds_one_encoder_layer_over_the_joined_states(architecture):
    aligned = tiny_compact(architecture, pair=True, cross_attention=True)
    composed = tiny_compact(architecture, pair=True, cross_attention=True, composition=True)
    assert aligned.composition is None
    # the same kind of layer as the encoder's first, reading the encoder's features instead of the embeddings
    first = composed.encoder[0][0] if architecture == "bilstm" else composed.encoder[0]
    extra = composed.composition[0][0] if architecture == "bilstm" else composed.composition[0]
    assert type(extra) is type(first)
    reads = (lambda layer: layer.input_size) if architecture == "bilstm" else (lambda layer: layer.in_channels)
    assert reads(first) == 12 and reads(extra) == composed.feature_width(composed.config)
    ids = torch.tensor([[2, 10, 11, 3, 20, 21, 3]])
    with torch.no_grad():  # it is on the path to the logits: zeroing it changes them
        before = composed(input_ids=ids).logits
        for weight in composed.composition.parameters():
            weight.zero_()
        assert not torch.allclose(composed(input_ids=ids).logits, before)
    with pytest.raises(ValueError, match="needs pair and cross_attention"):
        tiny_compact(architecture, pair=True, composition=True)


def test_the_backward_lstm_reads_each_row_reversed_within_its_length():
    from shrinkbert.core.compact.bilstm import reversed_within_length

    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    assert reversed_within_length(mask).tolist() == [[2, 1, 0, 3, 4], [4, 3, 2, 1, 0]]


@pytest.fixture(scope="module")
def teacher_and_data(tmp_path_factory):
    where = tmp_path_factory.mktemp("compact")
    return make_tiny_bert(where / "teacher"), write_tiny_csv(where / "data.csv", n=96), where


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_each_compact_student_goes_through_every_stage_to_a_bundle(architecture, teacher_and_data):
    import shrinkbert
    from shrinkbert.compress.edge_predictor import Predictor

    teacher, data, where = teacher_and_data
    out = where / architecture
    student = shrinkbert.distill(teacher=str(teacher), student=architecture, task=str(data), epochs=1, hidden=8,
                                 token_dim=16, learning_rate=3e-3, max_length=32, output_dir=str(out / "student"))
    record = student.manifest["student"]
    assert record["architecture"] == architecture and record["shape"]["embedding_dim"] == 16
    assert record["init"]["variance_kept"] > 0  # the token vectors came from the teacher's table
    config = json.loads((out / "student" / "config.json").read_text())
    assert config["model_type"] == f"shrinkbert-{architecture}"
    model = student.load()
    assert type(model).__name__.lower().startswith(architecture)
    onnx = shrinkbert.export(model=student, output_dir=str(out / "onnx"), parity_rows=16)
    assert onnx.metrics["parity"]["passed"] and onnx.metrics["optimization"] == "none"
    assert "optimization_skipped" in onnx.metrics
    int8 = shrinkbert.quantize(model=onnx, output_dir=str(out / "int8"), max_eval_rows=16)
    import onnx as onnx_lib

    ops = {node.op_type for node in onnx_lib.load(str(out / "int8" / "model.onnx")).graph.node}
    assert "MatMulInteger" in ops and "ConvInteger" not in ops  # the head is int8; convolutions stay float
    assert ("DynamicQuantizeLSTM" in ops) == (architecture == "bilstm")
    bundle = shrinkbert.bundle(model=int8, output_dir=str(out / "bundle"), parity_rows=8)
    assert all(check["passed"] for check in bundle.checks)
    predictor = bundle.load()
    assert isinstance(predictor, Predictor)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(out / "student"))
    batch = tokenizer(TEXTS, padding=True, truncation=True, max_length=32, return_tensors="pt")
    with torch.no_grad():
        torch_labels = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.argmax(-1)
    names = [model.config.id2label[int(i)] for i in torch_labels]
    # the fp32 graph gives a row the same logits alone and in a padded batch (int8 quantizes a batch's
    # activations together, so there only near-ties may differ)
    from shrinkbert.compress.common import ort_logits, ort_session

    session = ort_session(out / "onnx" / "model.onnx", 1)
    batched = ort_logits(session, tokenizer, [{"text": t, "text_pair": None, "label": 0} for t in TEXTS], 32, batch_size=len(TEXTS))
    alone = ort_logits(session, tokenizer, [{"text": t, "text_pair": None, "label": 0} for t in TEXTS], 32, batch_size=1)
    assert abs(batched - alone).max() < 1e-5
    bundled = [row["label"] for row in predictor.predict(TEXTS)]
    assert sum(a == b for a, b in zip(bundled, names)) >= len(TEXTS) - 1  # int8 may flip a near-tie
    if architecture == "bag":  # ONNX Runtime Mobile runs its ops (checked by the stage); transformers.js knows none
        from shrinkbert.core.errors import ShrinkbertError

        mobile = shrinkbert.bundle(model=int8, output_dir=str(out / "mobile"), target="mobile", parity_rows=8)
        assert all(check["passed"] for check in mobile.checks) and any((out / "mobile").rglob("*.ort"))
        with pytest.raises(ShrinkbertError, match="transformers.js"):
            shrinkbert.bundle(model=int8, output_dir=str(out / "web"), target="web")
        assert not (out / "web").exists()


def test_a_compact_student_of_a_pair_task_reads_both_texts(tmp_path):
    import shrinkbert

    teacher = make_tiny_bert(tmp_path / "teacher")
    data = tmp_path / "pairs.csv"
    lines = ["text,text_pair,label"] + [f"the film was {w},it was {v},{'positive' if (w == v) else 'negative'}"
                                        for w in ("good", "bad", "fine", "dull") for v in ("good", "bad", "fine", "dull")] * 4
    data.write_text("\n".join(lines) + "\n")
    student = shrinkbert.distill(teacher=str(teacher), student="bilstm", task=str(data), text_pair_column="text_pair", epochs=1, hidden=8,
                                 token_dim=16, max_length=32, cross_attention=True, composition=True,
                                 output_dir=str(tmp_path / "student"))
    assert student.manifest["student"]["shape"]["pair"] is True
    config = json.loads((tmp_path / "student" / "config.json").read_text())
    assert config["pair"] is True and config["cross_attention"] is True and config["composition"] is True
    # the alignment and the composition go through the stages: its graph holds the PyTorch student's logits, and int8's bundle passes
    onnx = shrinkbert.export(model=student, output_dir=str(tmp_path / "onnx"), parity_rows=16)
    assert onnx.metrics["parity"]["passed"]
    int8 = shrinkbert.quantize(model=onnx, output_dir=str(tmp_path / "int8"), max_eval_rows=16)
    bundle = shrinkbert.bundle(model=int8, output_dir=str(tmp_path / "bundle"), parity_rows=8)
    assert all(check["passed"] for check in bundle.checks)
    answers = bundle.load().predict(["the film was good", "the film was dull"], ["it was good", "it was bad"])
    assert [a["label"] for a in answers] and all(a["label"] in ("positive", "negative") for a in answers)


@pytest.mark.parametrize("args, says", [
    (["--student", "bilstm", "--hidden-weight", "1"], "no transformer layers for --hidden-weight"),
    (["--student", "cnn", "--target", "10x"], "shaped by --hidden, --layers and --token-dim"),
    (["--student", "bilstm", "--kernel-sizes", "2,3"], "--kernel-sizes shapes --student cnn"),
    (["--student", "bag", "--layers", "2"], "--layers stacks LSTM layers"),
    (["--token-dim", "16"], "shape a --student bilstm, cnn or bag"),
    (["--student", "bag", "--cross-attention"], "no token reads another"),
    (["--student", "cnn", "--cross-attention"], "aligns a pair's two texts"),
    (["--student", "bilstm", "--composition"], "it needs --cross-attention"),
])
def test_what_a_compact_student_cannot_take_is_refused_in_one_line(args, says, teacher_and_data, tmp_path):
    teacher, data, _ = teacher_and_data
    done = run_cli(["distill", "--teacher", str(teacher), "--task", str(data), "--output-dir", str(tmp_path / "s"),
                    *args], cwd=tmp_path)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and says in errors[0], done.stderr[-2000:]
    assert not (tmp_path / "s").exists()


def test_prune_refuses_a_compact_student(teacher_and_data, tmp_path):
    import shrinkbert
    from shrinkbert.core.errors import ShrinkbertError

    teacher, data, _ = teacher_and_data
    student = shrinkbert.distill(teacher=str(teacher), student="cnn", task=str(data), epochs=1, hidden=4,
                                 token_dim=8, max_length=32, output_dir=str(tmp_path / "student"))
    with pytest.raises(ShrinkbertError, match="no attention heads"):
        shrinkbert.prune(model=student, output_dir=str(tmp_path / "pruned"))
    assert not (tmp_path / "pruned").exists()


def test_a_saved_compact_student_loads_through_the_auto_class_in_a_fresh_process(teacher_and_data):
    _, _, where = teacher_and_data
    folder = where / "bag" / "student"
    if not folder.is_dir():
        pytest.skip("the bag student of the stage test is made first in this module")
    code = ("from shrinkbert.core.models import load_model;"
            "from transformers import AutoModelForSequenceClassification as A;"
            f"m = load_model(A, {str(folder)!r}); print(type(m).__name__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "BagForSequenceClassification", done.stderr[-2000:]
