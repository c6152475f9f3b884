"""int8 that reads the CPU: the ISA decides the defaults, the manifest records them, the user
overrides each; static int8 keeps LayerNorm/GELU/residual Add/Softmax inputs float; an accuracy-aware
tolerance that cannot be met says so in one line. Tiny models only."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from shrinkbert.core.errors import ShrinkbertError

AVX2 = {"fpu", "sse4_2", "avx", "avx2", "fma"}
AVX512 = AVX2 | {"avx512f", "avx512bw"}
VNNI = AVX512 | {"avx512_vnni"}


def fake_cpu(monkeypatch, flags: set[str], machine: str = "x86_64") -> None:
    import platform

    from shrinkbert.compress import int8
    from shrinkbert.core import device

    # one rule (core.device.detect_isa) serves the int8 defaults and the reports' machine line
    monkeypatch.setattr(device, "cpu_flags", lambda: set(flags))
    monkeypatch.setattr(int8, "cpu_flags", lambda: set(flags))
    monkeypatch.setattr(platform, "machine", lambda: machine)


@pytest.mark.parametrize("flags,machine,isa,reduce_range", [
    (AVX2, "x86_64", "avx2", True),
    (AVX512, "x86_64", "avx512", True),
    (VNNI, "x86_64", "avx512_vnni", False),
    ({"fp", "asimd"}, "aarch64", "arm64", False),
])
def test_the_isa_decides_the_defaults(monkeypatch, flags, machine, isa, reduce_range):
    from shrinkbert.compress import int8

    fake_cpu(monkeypatch, flags, machine)
    choice = int8.choose("auto")
    assert choice["isa"] == isa
    assert choice["per_channel"] is True and choice["weight_type"] == "s8"
    assert choice["reduce_range"] is reduce_range
    assert set(choice["source"].values()) == {"isa"}
    from shrinkbert.core.device import describe_machine

    assert describe_machine().endswith(isa)
    qconfig, recorded = int8.quantization_config("auto", False, None, [])
    assert qconfig.per_channel is True and qconfig.reduce_range is reduce_range
    assert recorded["isa"] == isa


def test_each_choice_is_overridable(monkeypatch):
    from onnxruntime.quantization import QuantType

    from shrinkbert.compress import int8

    fake_cpu(monkeypatch, AVX2)
    choice = int8.choose("auto", per_channel=False, reduce_range=False, weight_type="u8")
    assert (choice["per_channel"], choice["reduce_range"], choice["weight_type"]) == (False, False, "u8")
    assert set(choice["source"].values()) == {"user"}
    qconfig, _ = int8.quantization_config("avx512_vnni", False, None, [], None, "u8")
    assert qconfig.weights_dtype == QuantType.QUInt8 and qconfig.reduce_range is False  # the named ISA's default
    with pytest.raises(ShrinkbertError, match="weight_type"):
        int8.choose("avx2", weight_type="s4")
    with pytest.raises(ShrinkbertError, match="isa must be"):
        int8.choose("sse2")


@pytest.fixture(scope="module")
def onnx_dir(tmp_path_factory) -> Path:
    from shrinkbert.compress import export
    from fixtures import make_tiny_bert

    model = make_tiny_bert(tmp_path_factory.mktemp("isa") / "model")
    # unfused: static int8 and accuracy-aware mode need the graph's module names
    return export.run(export.Config(model=str(model), output_dir=str(tmp_path_factory.mktemp("isa") / "fp32"),
                                    parity_rows=4, optimization="none"))


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> str:
    from fixtures import write_tiny_csv

    return str(write_tiny_csv(tmp_path_factory.mktemp("isadata") / "tiny.csv", n=120))


def test_manifest_records_the_isa_and_every_choice(monkeypatch, onnx_dir, tmp_path):
    from shrinkbert.compress import quantize

    fake_cpu(monkeypatch, {"fp", "asimd"}, "aarch64")
    out = quantize.run(quantize.Config(model=str(onnx_dir), output_dir=str(tmp_path / "arm"), max_eval_rows=0))
    m = json.loads((out / "shrinkbert.json").read_text())["metrics"]
    assert m["isa"] == "arm64" and m["int8_choice"]["reduce_range"] is False and m["int8_choice"]["per_channel"]
    fake_cpu(monkeypatch, AVX2)
    out = quantize.run(quantize.Config(model=str(onnx_dir), output_dir=str(tmp_path / "avx2"), max_eval_rows=0,
                                       per_channel=False))
    choice = json.loads((out / "shrinkbert.json").read_text())["metrics"]["int8_choice"]
    assert choice["isa"] == "avx2" and choice["reduce_range"] is True and choice["per_channel"] is False
    assert choice["source"] == {"per_channel": "user", "reduce_range": "isa", "weight_type": "isa"}


def test_fused_graph_gets_the_same_choices(monkeypatch, tmp_path):
    """The O2 path (quantize_dynamic with DefaultTensorType) receives the ISA's per-channel and reduce_range."""
    from shrinkbert.compress import int8

    seen = {}

    def fake_quantize_dynamic(src, dst, **kwargs):
        seen.update(kwargs)

    import onnxruntime.quantization as ortq

    monkeypatch.setattr(ortq, "quantize_dynamic", fake_quantize_dynamic)
    fake_cpu(monkeypatch, AVX2)
    qconfig, _ = int8.quantization_config("auto", False, None, ["n1"])
    int8.quantize_file(tmp_path / "in.onnx", tmp_path / "out.onnx", qconfig, fused=True)
    assert seen["per_channel"] is True and seen["reduce_range"] is True and seen["nodes_to_exclude"] == ["n1"]
    assert "DefaultTensorType" in seen["extra_options"]


def test_static_keeps_layernorm_gelu_add_softmax_float(onnx_dir):
    import onnx

    from shrinkbert.compress import int8
    from shrinkbert.compress.common import onnx_file

    graph = onnx.load(str(onnx_file(onnx_dir)))
    kinds = int8.float_nodes(graph, list(int8.FLOAT_KINDS))
    assert all(kinds[k] for k in int8.FLOAT_KINDS), {k: len(v) for k, v in kinds.items()}
    ops = {n.name: n.op_type for n in graph.graph.node}
    assert not any(ops[n] in ("MatMul", "Gemm") for names in kinds.values() for n in names)
    assert any(ops[n] == "Softmax" for n in kinds["softmax_input"])
    with pytest.raises(ShrinkbertError, match="keep_float"):
        int8.float_nodes(graph, ["dropout"])


def test_a_tolerance_that_cannot_be_met_says_so(tmp_path):
    """Accuracy that comes back only with every module float: not met, and the search says why."""
    from shrinkbert.compress import accuracy_aware

    groups = {"encoder.layer.0.attention": ["a"], "encoder.layer.0.output": ["b"], "classifier": ["c"]}
    labels = [0, 1] * 50
    fp32 = np.eye(2)[labels].astype(np.float32)
    wrong = fp32[:, ::-1].copy()

    def quantize(dst, nodes):
        dst.write_text(",".join(sorted(nodes)))
        return dst

    def evaluate(path):  # right only when every group is kept float
        return fp32 if path.read_text() == "a,b,c" else wrong

    result = accuracy_aware.search(tmp_path, groups, [], quantize, evaluate, labels, fp32, 0.5, margin_z=1.0)
    assert not result["met"] and result["everything_kept"]
    assert result["steps"][0]["loss_points"] == 100.0 and result["rows"] == 100


def test_the_stage_refuses_an_unmeetable_tolerance_in_one_line(monkeypatch, onnx_dir, data, tmp_path, capsys):
    from shrinkbert.compress import accuracy_aware, quantize

    def unmeetable(src, groups, base, quantize_fn, evaluate, labels, fp32_logits, tolerance, margin_z=0.0, holds=None):
        return {"table": [], "kept_fp32": list(groups), "met": False, "everything_kept": True, "rows": len(labels),
                "steps": [{"kept_fp32": [], "accuracy": 0.5, "loss_points": 3.0, "se_points": 1.2}],
                "loss_points": 0.0, "se_points": 0.0, "bound_points": 0.0, "accuracy_all_int8": 0.5}

    monkeypatch.setattr(accuracy_aware, "search", unmeetable)
    args = ["--model", str(onnx_dir), "--output-dir", str(tmp_path / "aa"), "--task", data, "--accuracy-aware",
            "--tolerance", "0.1"]
    assert quantize.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot be met" in err[0] and "every module float" in err[0]
    assert not (tmp_path / "aa").exists()
    assert quantize.main(args + ["--allow-unmet"]) == 0
    m = json.loads((tmp_path / "aa" / "shrinkbert.json").read_text())["metrics"]["accuracy_aware"]
    assert m["met"] is False and m["validation_rows"] > 0


def _tiny_config():
    from transformers import BertConfig

    return BertConfig(vocab_size=1000, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=64, max_position_embeddings=64)


@pytest.mark.parametrize("runtime", ["onnx", "onnx-int8"])
def test_latency_target_on_the_shipping_runtime_leaves_torch_threads_alone(runtime):
    import torch

    from shrinkbert.students.shape import parse_target, pick_by_latency

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        lines = []
        shape, rows = pick_by_latency(_tiny_config(), parse_target("10000ms"), seq_len=16, threads=2, runs=2,
                                      warmup=1, hidden_steps=[32], runtime=runtime, log=lines.append)
        assert torch.get_num_threads() == 1  # as it was found, though timing used 2
        assert shape.layers == 2 and all(r["p50_ms"] is not None for r in rows)
        assert runtime in lines[0] and "2 threads" in lines[0]
        with pytest.raises(ShrinkbertError) as err:
            pick_by_latency(_tiny_config(), parse_target("0.0001ms"), seq_len=16, threads=2, runs=2, warmup=1,
                            hidden_steps=[32], runtime=runtime, log=lambda _: None)
        message = str(err.value)
        assert "\n" not in message and "cannot be met" in message and runtime in message
        assert torch.get_num_threads() == 1
        with pytest.raises(ShrinkbertError, match="runtime must be one of"):
            pick_by_latency(_tiny_config(), parse_target("1ms"), runtime="tensorrt", log=lambda _: None)
    finally:
        torch.set_num_threads(before)


def test_int4_is_a_weight_only_size_option(onnx_dir, tmp_path):
    import onnx

    from shrinkbert.compress import quantize
    from shrinkbert.compress.common import onnx_file

    out = quantize.run(quantize.Config(model=str(onnx_dir), output_dir=str(tmp_path / "int4"), approach="int4",
                                       int4_block_size=16, max_eval_rows=0))
    ops = {n.op_type for n in onnx.load(str(onnx_file(out))).graph.node}
    assert "MatMulNBits" in ops and "GatherBlockQuantized" in ops
    m = json.loads((out / "shrinkbert.json").read_text())["metrics"]
    assert m["approach"] == "int4" and m["int8_choice"]["bits"] == 4 and m["quantized_nodes"] > 0
    with pytest.raises(ShrinkbertError, match="block_size"):
        quantize.run(quantize.Config(model=str(onnx_dir), output_dir=str(tmp_path / "bad"), approach="int4",
                                     int4_block_size=24, max_eval_rows=0))


def test_accuracy_aware_ranks_by_sensitivity_and_keeps_the_fewest_modules_float(tmp_path):
    """Scripted int8 damage: quantizing group B flips 6 of 100 rows, A flips 2, C none. The search must
    rank B, A, C; with a 3-point tolerance keep only B; with a 1-point tolerance keep B and A."""
    import json

    import numpy as np

    from shrinkbert.compress.accuracy_aware import search

    labels = [i % 2 for i in range(100)]
    fp32_logits = np.array([[0.0, 1.0] if y else [1.0, 0.0] for y in labels], dtype=np.float32)
    damage = {"B": range(0, 6), "A": range(10, 12), "C": range(0)}
    groups = {"A": ["a1"], "B": ["b1", "b2"], "C": ["c1"]}

    def quantize(dst, exclude_nodes):
        dst.write_text(json.dumps(sorted(exclude_nodes)))
        return dst

    def evaluate(path):
        kept_float = set(json.loads(path.read_text()))
        logits = fp32_logits.copy()
        for group, rows in damage.items():
            if not set(groups[group]) <= kept_float:
                logits[list(rows)] = logits[list(rows)][:, ::-1]
        return logits

    loose = search(tmp_path / "src.onnx", groups, [], quantize, evaluate, labels, fp32_logits, tolerance_points=3.0)
    assert [row["module"] for row in loose["table"]] == ["B", "A", "C"]
    assert loose["kept_fp32"] == ["B"] and loose["met"]
    tight = search(tmp_path / "src.onnx", groups, [], quantize, evaluate, labels, fp32_logits, tolerance_points=1.0)
    assert tight["kept_fp32"] == ["B", "A"] and tight["met"]


def test_accuracy_aware_keeps_modules_float_until_the_kinds_own_checks_hold_too(tmp_path):
    """Vectors whose score is within tolerance but whose directions drift (an embedding's int8 agreement):
    the search keeps float the module whose outputs drift most, ranked by drift, until `holds` passes."""
    import json

    from shrinkbert.compress.accuracy_aware import Judge, search

    fp32 = np.eye(4, dtype=np.float32)
    drift = {"A": 0.05, "B": 0.4, "C": 0.1}  # how far each group's int8 moves the vectors
    groups = {name: [name.lower()] for name in drift}

    def quantize(dst, exclude_nodes):
        dst.write_text(json.dumps(sorted(exclude_nodes)))
        return dst

    def evaluate(path):
        kept_float = set(json.loads(path.read_text()))
        return fp32 + sum(amount for name, amount in drift.items() if name.lower() not in kept_float)

    judge = Judge(lambda outputs: 1.0, lambda a, b: (0.0, 0.0), rows=4, name="score", rank_by="drift")
    free = search(tmp_path / "src.onnx", groups, [], quantize, evaluate, judge, fp32, tolerance_points=0.5)
    assert free["met"] and free["kept_fp32"] == []  # the score alone is within tolerance: nothing kept
    holds = lambda a, b: float(np.abs(a - b).mean()) <= 0.2  # noqa: E731
    held = search(tmp_path / "src.onnx", groups, [], quantize, evaluate, judge, fp32, tolerance_points=0.5, holds=holds)
    assert [row["module"] for row in held["table"]] == ["B", "C", "A"]
    assert held["kept_fp32"] == ["B"] and held["met"]


def test_onnx_timer_interleaves_a_teacher_sized_neighbour(monkeypatch):
    """Candidates are timed as the report times variants: each timed call follows another model's call."""
    import torch
    from transformers import BertForSequenceClassification

    from shrinkbert.students import shape as shape_module

    from shrinkbert.compress import common

    calls = []
    original = common.ort_session  # the timer imports it when it runs, so it sees the patch below

    def counting_session(path, threads=None):
        session = original(path, threads)

        class Counted:
            def run(self, *args, **kwargs):
                calls.append(Path(str(path)).name)
                return session.run(*args, **kwargs)
        return Counted()

    monkeypatch.setattr(common, "ort_session", counting_session)
    timer = shape_module.onnx_timer("onnx", threads=1, warmup=1, runs=3, neighbour_config=_tiny_config())
    torch.manual_seed(0)
    model = BertForSequenceClassification(_tiny_config()).eval()
    ms = timer(model, torch.randint(0, 1000, (1, 16)))
    assert ms > 0
    assert calls == ["n.onnx", "model.onnx"] * 4  # neighbour, candidate, neighbour, candidate, ...


def test_torch_timer_interleaves_a_teacher_sized_neighbour(monkeypatch):
    """The torch runtime's candidates are timed interleaved too, not back to back."""
    import torch
    from transformers import BertForSequenceClassification

    from shrinkbert.students import shape as shape_module

    calls = []
    original = BertForSequenceClassification.forward

    def counting_forward(self, *args, **kwargs):
        calls.append(self.config.num_hidden_layers)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(BertForSequenceClassification, "forward", counting_forward)
    neighbour = _tiny_config()
    neighbour.num_hidden_layers = 3
    timer = shape_module.torch_timer(warmup=1, runs=3, neighbour_config=neighbour)
    torch.manual_seed(0)
    model = BertForSequenceClassification(_tiny_config()).eval()
    assert timer(model, torch.randint(0, 1000, (1, 16))) > 0
    assert calls == [3, _tiny_config().num_hidden_layers] * 4  # neighbour, candidate, neighbour, candidate, ...


def test_a_calibration_set_is_checked_and_its_missing_token_types_are_zeros():
    from shrinkbert.compress.int8 import check_calibration

    ids = np.arange(12).reshape(4, 3)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    out = check_calibration({"input_ids": ids, "attention_mask": np.ones_like(ids)}, names, min_rows=4)
    assert set(out) == set(names) and all(a.dtype == np.int64 for a in out.values())
    assert not out["token_type_ids"].any() and out["token_type_ids"].shape == ids.shape
    for features, message in [({"input_ids": ids}, r"lacks model input\(s\) attention_mask"),
                              ({"input_ids": ids, "attention_mask": np.ones((4, 5), int)}, "disagree in shape"),
                              ({"input_ids": ids, "attention_mask": np.ones((4, 3))}, "2-D integer array"),
                              ({"input_ids": ids[:2], "attention_mask": ids[:2]}, "has 2 rows")]:
        with pytest.raises(ShrinkbertError, match=message):
            check_calibration(features, names, min_rows=4)
