"""Artifacts are checked on load against the sizes and hashes their manifests recorded:
a weight file flipped in place or cut short stops the next stage in one line; --no-verify lets a
deliberately edited artifact through and says so in the child's manifest."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from shrinkbert.core.errors import ShrinkbertError

sys.path.insert(0, str(Path(__file__).parent))
from fixtures import make_tiny_bert, write_tiny_csv  # noqa: E402


@pytest.fixture(scope="module")
def student(tmp_path_factory) -> Path:
    """A fine-tuned tiny teacher's manifest lists its weight file with size and sha256."""
    import shrinkbert

    root = tmp_path_factory.mktemp("verify")
    start = make_tiny_bert(root / "init")
    task = write_tiny_csv(root / "tiny.csv", n=64)
    out = shrinkbert.finetune(model=str(start), task=str(task), epochs=1, max_length=32, checkpoint_every=0,
                              output_dir=str(root / "teacher")).path
    return Path(out)


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _flip_middle(file: Path, size: int = 4096) -> None:
    data = bytearray(file.read_bytes())
    middle = len(data) // 2
    data[middle:middle + size] = bytes(b ^ 0xFF for b in data[middle:middle + size])
    file.write_bytes(bytes(data))


def test_the_manifest_records_each_weight_file(student):
    from shrinkbert.core.artifacts import file_records

    files = json.loads((student / "shrinkbert.json").read_text())["files"]
    assert set(files) == {"model.safetensors"}
    assert files == file_records(student)


def test_a_flipped_weight_file_stops_the_next_stage(student, tmp_path):
    import shrinkbert

    edited = _copy(student, tmp_path / "edited")
    _flip_middle(edited / "model.safetensors")
    with pytest.raises(ShrinkbertError, match=r"model.safetensors does not match the sha256 .*--no-verify") as err:
        shrinkbert.export(model=str(edited), output_dir=str(tmp_path / "onnx"))
    assert "\n" not in str(err.value)
    assert not (tmp_path / "onnx").exists()


def test_a_cut_file_names_its_size(student, tmp_path):
    import shrinkbert

    edited = _copy(student, tmp_path / "cut")
    weights = edited / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    with pytest.raises(ShrinkbertError, match=r"has [\d,]+ bytes, its shrinkbert.json recorded [\d,]+"):
        shrinkbert.distill(teacher=str(edited), layers=1, max_steps=1, output_dir=str(tmp_path / "s"))


def test_no_verify_lets_an_edited_artifact_through_and_says_so(student, tmp_path, monkeypatch):
    import torch
    from safetensors.torch import load_file, save_file

    from shrinkbert.compress import export

    edited = _copy(student, tmp_path / "edited")
    weights = load_file(edited / "model.safetensors")
    weights["classifier.bias"] = weights["classifier.bias"] + torch.tensor([0.5, -0.5])  # a user's deliberate edit
    save_file(weights, edited / "model.safetensors", metadata={"format": "pt"})
    monkeypatch.delenv("SHRINKBERT_NO_VERIFY", raising=False)
    assert export.main(["--model", str(edited), "--output-dir", str(tmp_path / "refused")]) == 2
    assert not (tmp_path / "refused").exists()
    try:
        assert export.main(["--model", str(edited), "--output-dir", str(tmp_path / "onnx"), "--no-verify",
                            "--optimization", "none"]) == 0
    finally:
        os.environ.pop("SHRINKBERT_NO_VERIFY", None)  # main() set it for this process (and its workers)
    manifest = json.loads((tmp_path / "onnx" / "shrinkbert.json").read_text())
    assert manifest["verify"].startswith("skipped (--no-verify)")


def test_eval_takes_no_verify_as_every_stage_does(student, tmp_path, monkeypatch):
    """eval lists --no-verify in its help, so it must accept it (it once refused it as an unknown option)."""
    from shrinkbert.eval.harness import parse_args

    monkeypatch.delenv("SHRINKBERT_NO_VERIFY", raising=False)
    try:
        config = parse_args([str(student), "--no-verify", "--out", str(tmp_path / "report")])
        assert os.environ.get("SHRINKBERT_NO_VERIFY") == "1"
    finally:
        os.environ.pop("SHRINKBERT_NO_VERIFY", None)
    assert config.artifacts == [str(student)]


def test_an_edited_graph_stops_quantize(student, tmp_path):
    import shrinkbert

    onnx = shrinkbert.export(model=str(student), output_dir=str(tmp_path / "onnx"), optimization="none").path
    _flip_middle(Path(onnx) / "model.onnx", size=64)
    with pytest.raises(ShrinkbertError, match="model.onnx does not match the sha256"):
        shrinkbert.quantize(model=str(onnx), output_dir=str(tmp_path / "int8"))


def test_a_verified_file_is_hashed_once(student, monkeypatch):
    from shrinkbert.core import verify

    verify.verify_artifact(student)  # remembered by path, size and mtime
    monkeypatch.setattr(verify, "file_sha256", lambda file: pytest.fail(f"hashed {file} again"))
    verify.verify_artifact(student)


def test_a_bundle_checks_its_own_model_file(student, tmp_path):
    import subprocess

    import shrinkbert
    from shrinkbert.compress.bundle_files import BundleDamaged
    from shrinkbert.compress.edge_predictor import Predictor

    onnx = shrinkbert.export(model=str(student), output_dir=str(tmp_path / "onnx"), optimization="none").path
    bundle = Path(shrinkbert.bundle(model=str(onnx), output_dir=str(tmp_path / "bundle"), max_length=32).path)
    assert (bundle / "bundle_files.py").is_file()
    Predictor(bundle).predict(["good film"])  # intact: it loads and answers
    _flip_middle(bundle / "model.onnx", size=64)
    with pytest.raises(BundleDamaged, match="model.onnx does not match the sha256 the bundle recorded"):
        Predictor(bundle)
    done = subprocess.run([sys.executable, str(bundle / "predict.py"), "good film"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().startswith("error: ") and len(done.stderr.strip().splitlines()) == 1


def test_a_bundle_that_truncates_early_is_refused(tmp_path, monkeypatch):
    """Watched to fail: a bundle cutting texts at half its max_length agrees with its model on every
    short validation row; only the parity rows at and past max_length catch it."""
    import torch
    from transformers import AutoModelForSequenceClassification

    import shrinkbert
    from fixtures import restamp
    from shrinkbert.compress import edge_predictor

    sharp = make_tiny_bert(tmp_path / "sharp")  # random weights, a loud classifier: every token moves the logits
    model = AutoModelForSequenceClassification.from_pretrained(sharp)
    with torch.no_grad():
        model.classifier.weight.mul_(50.0)
    model.save_pretrained(sharp, safe_serialization=True)
    restamp(sharp)
    onnx = shrinkbert.export(model=str(sharp), output_dir=str(tmp_path / "onnx"), optimization="none").path
    intact = shrinkbert.bundle(model=str(onnx), output_dir=str(tmp_path / "ok"), max_length=32)
    assert intact.metrics["vs_source"]["long_texts"]["rows"] == 2
    assert "texts at and past 32 tokens" in intact.checks[0]["detail"]

    original = edge_predictor.Predictor.__init__

    def cut_at_half(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.tokenizer.enable_truncation(self.max_length // 2)
    monkeypatch.setattr(edge_predictor.Predictor, "__init__", cut_at_half)
    with pytest.raises(ShrinkbertError, match="bundle parity failed"):
        shrinkbert.bundle(model=str(onnx), output_dir=str(tmp_path / "cut"), max_length=32)
    assert not (tmp_path / "cut").exists()
