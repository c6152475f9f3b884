"""What every bundle's predict.py shares, copied into every bundle beside it; the standard library only
(onnxruntime is imported by the caller that needs it).

- `check_files`: a bundle checks its own files at start: each file its shrinkbert.json
  lists (the model graph, the vector table) must have the recorded size and sha256, so a bundle
  damaged in transit or edited by hand fails in one line instead of answering wrongly (a few MB hash
  in milliseconds).
- `open_session`: the bundle's ONNX Runtime session, its worker threads flushing denormal floats to
  zero unless the bundle says otherwise. ONNX Runtime's attention adds a large negative number at
  padded positions, and the softmax over them then computes with denormal floats, which x86 cores
  handle slowly, most on short texts padded far and on long windows (bench/denormals.py measures the
  difference). Values below 1.2e-38 become 0, nothing a logit or a vector can show.
"""
from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path


class BundleDamaged(RuntimeError):
    pass


def check_files(root: str | Path) -> None:
    root = Path(root)
    manifest = root / "shrinkbert.json"
    if not manifest.is_file():  # a bundle being written, or one from before files were recorded
        return
    for name, expected in (json.loads(manifest.read_text()).get("files") or {}).items():
        file = root / name
        if not file.is_file():
            raise BundleDamaged(f"{file} is missing (the bundle's shrinkbert.json lists it)")
        if file.stat().st_size != expected["size"]:
            raise BundleDamaged(f"{file} has {file.stat().st_size:,} bytes, the bundle recorded {expected['size']:,}: "
                                "it was cut or replaced; copy the bundle again")
        digest = hashlib.sha256()
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        if digest.hexdigest() != expected["sha256"]:
            raise BundleDamaged(f"{file} does not match the sha256 the bundle recorded: it was changed after the "
                                "bundle was written; copy the bundle again")


def runs_on_caller(threads: int | None) -> bool:
    """Whether an ONNX Runtime session of `threads` intra-op threads keeps no pool and computes on the
    caller's thread alone (so that, flushing denormals, it flushes them there: `open_session`)."""
    return threads == 1


def open_session(model_file: str | Path, options, flush_denormals: bool = True):
    """A CPU InferenceSession of `model_file` with `options` (an onnxruntime.SessionOptions). With
    `flush_denormals`, ONNX Runtime sets flush-to-zero on its threads and on the thread that creates
    the session. With two or more threads it is created on a thread of its own here, so the caller's
    thread (and PyTorch or numpy running on it in the user's process) keeps its floating-point
    settings. A one-thread session keeps no pool: every kernel runs on the caller's thread, so it is
    created there, and that thread flushes too (`bench/denormals.py --threads 1` measures that case)."""
    import onnxruntime as ort

    def create():
        return ort.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])

    if not flush_denormals:
        return create()
    options.add_session_config_entry("session.set_denormal_as_zero", "1")
    if runs_on_caller(options.intra_op_num_threads):
        return create()
    made: dict = {}

    def create_apart():
        try:
            made["session"] = create()
        except BaseException as err:  # raised again in the caller's thread
            made["error"] = err

    thread = threading.Thread(target=create_apart, name="ort-session")
    thread.start()
    thread.join()
    if "error" in made:
        raise made["error"]
    return made["session"]
