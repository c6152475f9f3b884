"""Untrusted and broken model files, tried as a new user would: through the stage's command line.

Each bad input gets one `error:` line, exit status 2, and the artifact already at the output
path is left exactly as it was.
"""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_DIRS = ("core", "teachers", "students", "compress", "eval", "shrinkbert")


def broken_copy(tiny_bert: Path, tmp_path: Path, how: str) -> Path:
    bad = tmp_path / how
    shutil.copytree(tiny_bert, bad)
    if how.endswith("-own"):  # not the kit's artifact: no manifest recording its files
        (bad / "shrinkbert.json").unlink()
        how = how.removesuffix("-own")
    weights = bad / "model.safetensors"
    if how == "pickle":  # what an old checkpoint looks like: pytorch_model.bin, no safetensors
        weights.rename(bad / "pytorch_model.bin")
    elif how == "truncated":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif how == "garbage-header":
        weights.write_bytes(b"\xff" * 64)
    elif how == "big-vocab":  # a tokenizer that is not the model's: more tokens than embeddings
        vocab = (bad / "vocab.txt").read_text().splitlines()
        (bad / "vocab.txt").write_text("\n".join(vocab + [f"extra{i}" for i in range(500)]) + "\n")
        (bad / "tokenizer.json").unlink(missing_ok=True)
    return bad


@pytest.mark.parametrize("how, message", [
    ("pickle", "pickle checkpoint and is refused; convert it to safetensors"),
    ("truncated", "has 53,364 bytes, its shrinkbert.json recorded 106,728: the file was cut or replaced"),
    ("garbage-header", "has 64 bytes, its shrinkbert.json recorded"),  # verify-on-load: the kit's own artifacts
    ("truncated-own", "cannot load model"),  # a user's folder with no manifest: the loader says it
    ("garbage-header-own", "cannot load model"),
    ("big-vocab", "do not belong together"),
])
def test_bad_model_dirs_fail_in_one_line_and_overwrite_nothing(how, message, tiny_bert, tiny_csv, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "previous.txt").write_text("an earlier artifact")
    bad = broken_copy(tiny_bert, tmp_path, how)
    result = subprocess.run([sys.executable, "-m", "shrinkbert.teachers.finetune", "--model", str(bad), "--task", str(tiny_csv),
                             "--cache-dir", str(tmp_path / "cache"), "--output-dir", str(out), "--epochs", "1"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and message in last, last
    assert [p.name for p in out.iterdir()] == ["previous.txt"]
    assert (out / "previous.txt").read_text() == "an earlier artifact"


def test_pickle_refusal_names_the_conversion_command(tiny_bert, tmp_path):
    from shrinkbert.core.errors import ShrinkbertError
    from shrinkbert.core.models import check_model_dir

    with pytest.raises(ShrinkbertError, match=r"weights_only=True.*model\.safetensors"):
        check_model_dir(broken_copy(tiny_bert, tmp_path, "pickle"))


def _source_lines():
    for folder in SOURCE_DIRS:
        for path in (ROOT / folder).rglob("*.py"):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                yield f"{path.relative_to(ROOT)}:{number}", line


def test_no_remote_code_and_no_unsafe_torch_load():
    remote = [where for where, line in _source_lines() if re.search(r"trust_remote_code\s*=\s*True", line)]
    assert not remote, f"trust_remote_code=True at {remote}"
    unsafe = [where for where, line in _source_lines()
              if re.search(r"\btorch\.load\(", line) and "weights_only=True" not in line]
    assert not unsafe, f"torch.load without weights_only=True at {unsafe}"
    pickles = [where for where, line in _source_lines() if re.search(r"^\s*import pickle|pickle\.loads?\(", line)]
    assert not pickles, f"pickle loading at {pickles}"
    # Accelerate unpickles objects registered for checkpointing with weights_only=False.
    registered = [where for where, line in _source_lines() if "register_for_checkpointing(" in line]
    assert not registered, f"register_for_checkpointing (pickled on save, unpickled on resume) at {registered}"


BAD_DATA = {
    "quotes.csv": (b'text,label\n"a good film,positive\nbad,negative\n', "cannot read"),
    "latin1.csv": ("text,label\ncaf\xe9 good,positive\n".encode("latin-1"), "not UTF-8"),
    "empty.csv": (b"", "is empty"),
    "nocolumn.csv": (b"review,label\n" + b"".join(b"s%d,pos\n" % i for i in range(12)), "no text column 'text'"),
}


@pytest.mark.parametrize("name", sorted(BAD_DATA))
def test_bad_data_files_fail_in_one_line_and_overwrite_nothing(name, tiny_bert, tmp_path, capsys):
    from shrinkbert.teachers import finetune

    content, message = BAD_DATA[name]
    (tmp_path / name).write_bytes(content)
    out = tmp_path / "out"
    out.mkdir()
    (out / "previous.txt").write_text("an earlier artifact")
    code = finetune.main(["--model", str(tiny_bert), "--task", str(tmp_path / name), "--epochs", "1",
                          "--cache-dir", str(tmp_path / "cache"), "--output-dir", str(out)])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and last.startswith("error: ") and message in last, last
    assert [p.name for p in out.iterdir()] == ["previous.txt"]
    assert (out / "previous.txt").read_text() == "an earlier artifact"


@pytest.mark.parametrize("module, args, message", [
    ("prune", ["--model", "{missing}", "--importance", "magnitude"], "does not exist"),
    ("prune", ["--model", "{model}", "--head-fraction", "1.5"], "--head-fraction must be >= 0 and < 1"),
    ("export", ["--model", "{missing}"], "does not exist"),
    ("export", ["--model", "{model}", "--optimization", "O9"], "--optimization must be one of none, O1, O2"),
    ("bundle", ["--model", "{model}"], "expected one model.onnx (it holds PyTorch weights: `shrinkbert export"),
    ("bundle", ["--model", "{missing}"], "does not exist"),
    ("quantize", ["--model", "{missing}"], "does not exist"),
    ("sparsify", ["--model", "{model}", "--sparsity", "1"], "--sparsity must be >= 0 and < 1"),
    ("sparsify", ["--model", "{pickle}"], "pickle checkpoint and is refused"),
    ("trim_vocab", ["--model", "{model}", "--corpus-files", "{missing}"], "does not exist"),
    ("trim_vocab", ["--model", "{truncated}"], "its shrinkbert.json recorded"),
])
def test_compress_stages_refuse_bad_input_in_one_line_and_write_nothing(module, args, message, tiny_bert, tmp_path):
    paths = {"model": str(tiny_bert), "missing": str(tmp_path / "no-such-dir"),
             "pickle": str(broken_copy(tiny_bert, tmp_path, "pickle")),
             "truncated": str(broken_copy(tiny_bert, tmp_path, "truncated"))}
    out = tmp_path / "out"
    argv = [a.format(**paths) for a in args] + ["--output-dir", str(out), "--cache-dir", str(tmp_path / "cache")]
    result = subprocess.run([sys.executable, "-m", f"shrinkbert.compress.{module}", *argv],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0], result.stderr[-2000:]
    assert not out.exists() and not list(tmp_path.glob(".partial-*"))
