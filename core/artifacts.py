"""The artifact contract: every stage writes one directory, atomically, with a shrinkbert.json.

A PyTorch artifact is a `save_pretrained` directory; an ONNX artifact is Optimum's layout.
Both carry shrinkbert.json (stage, parents and their hashes, resolved config, metrics,
parameter count, library versions, seed). The manifest is written last, inside a temporary
sibling that is renamed into place, so a directory with a manifest is a finished artifact and
a killed stage leaves the old artifact or none.
"""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import re
import shutil
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.verify import skipped as verify_skipped

MANIFEST = "shrinkbert.json"
TMP_MARK = ".partial-"
# Files whose bytes define what an artifact computes; their hash is the artifact's identity.
CONTENT_SUFFIXES = (".safetensors", ".onnx", ".json", ".txt", ".model")
# Files whose size and sha256 the manifest records, checked whenever the artifact is loaded.
RECORDED_SUFFIXES = (".safetensors", ".onnx", ".ort", ".npy", ".data")
TRACKED_LIBRARIES = ("torch", "transformers", "tokenizers", "accelerate", "optimum", "optimum-onnx",
                     "onnx", "onnxruntime", "datasets", "evaluate", "safetensors", "numpy")


def library_versions() -> dict[str, str]:
    versions = {}
    for name in TRACKED_LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def is_artifact(path: str | Path) -> bool:
    """A finished artifact is a directory whose manifest exists (it is written last)."""
    path = Path(path)
    if not path.exists():
        _await_replacement(path)
    return (path / MANIFEST).is_file()


def read_manifest(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        _await_replacement(path)
    if not path.exists():
        raise ShrinkbertError(f"artifact {path} does not exist")
    if not is_artifact(path):
        raise ShrinkbertError(f"{path} is not a finished shrinkbert artifact (no {MANIFEST})")
    try:
        return json.loads((path / MANIFEST).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ShrinkbertError(f"{path / MANIFEST} is not valid JSON: {err}") from None


def content_hashes(path: str | Path, records: bool = True) -> tuple[str, dict[str, dict[str, Any]]]:
    """(the artifact's hash, its weight and graph files' records), each file read once.

    The hash is sha256 over the content files (weights, graphs, configs, vocab; manifest excluded),
    each preceded by its relative path: the artifact's identity. The records ({relative path: {size,
    sha256}} of the .safetensors/.onnx/.ort/.npy/.data files) are the manifest's "files", which every stage
    that loads the artifact checks (core/verify.py)."""
    path = Path(path)
    digest, found = hashlib.sha256(), {}
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        name = str(file.relative_to(path))
        in_identity = file.name != MANIFEST and file.name.endswith(CONTENT_SUFFIXES)
        recorded = records and file.name.endswith(RECORDED_SUFFIXES)
        if not (in_identity or recorded):
            continue
        own = hashlib.sha256() if recorded else None
        if in_identity:
            digest.update(name.encode())
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                if in_identity:
                    digest.update(block)
                if own is not None:
                    own.update(block)
        if own is not None:
            found[name] = {"size": file.stat().st_size, "sha256": own.hexdigest()}
    return digest.hexdigest(), found


def artifact_hash(path: str | Path) -> str:
    """sha256 over the content files (weights, graphs, configs, vocab), manifest excluded."""
    return content_hashes(path, records=False)[0]


def file_records(path: str | Path) -> dict[str, dict[str, Any]]:
    """The manifest's "files": size and sha256 of each weight and graph file."""
    return content_hashes(path)[1]


def parent_record(path: str | Path) -> dict[str, str]:
    path = Path(path).resolve()
    record = {"path": str(path), "hash": artifact_hash(path) if path.is_dir() else ""}
    if is_artifact(path):
        record["stage"] = read_manifest(path).get("stage", "")
    return record


def write_manifest(out_dir: str | Path, *, stage: str, parents: list[str | Path] = (),
                   config: dict[str, Any] | None = None, metrics: dict[str, Any] | None = None,
                   seed: int | None = None, num_parameters: int | None = None,
                   data: dict[str, Any] | None = None, checks: list[dict[str, Any]] | None = None,
                   resolved: dict[str, Any] | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write shrinkbert.json into out_dir (normally the temporary dir of `atomic_artifact`).

    config: the options as the user gave them; resolved: the settings the stage derived from them, its
    parents or its kind (max_length), which later stages inherit; data: the data spec
    (core.data.dataspec) later stages inherit; checks: what the stage verified, as [{name, passed,
    detail}] (see `check`): the report reads failures from there only.
    """
    manifest = {
        "stage": stage,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "parents": [parent_record(p) for p in parents],
        "config": config or {},
        "resolved": resolved or {},
        "data": data,
        "metrics": metrics or {},
        "checks": list(checks or []),
        "num_parameters": num_parameters,
        "seed": seed,
        "versions": library_versions(),
    }
    manifest["hash"], manifest["files"] = content_hashes(out_dir)  # one read of each file for both
    if verify_skipped():
        manifest["verify"] = "skipped (--no-verify): its parents' files were not checked against their manifests"
    manifest.update(extra or {})
    write_files({Path(out_dir) / MANIFEST: json.dumps(manifest, indent=2, default=str)})
    return manifest


def save_model_artifact(out_dir: str | Path, model, tokenizer, **manifest) -> dict[str, Any]:
    """The ending every PyTorch stage shares: the model (safetensors) and its tokenizer saved with
    `save_pretrained`, then the manifest (`write_manifest`'s keywords), all landing atomically."""
    with atomic_artifact(out_dir) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        written = write_manifest(tmp, **manifest)
    return written


def check(name: str, passed: bool, detail: str = "") -> dict[str, Any]:
    """One entry of a manifest's "checks": what was verified, whether it held, and the evidence."""
    return {"name": name, "passed": bool(passed), "detail": detail}


def failed_checks(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in manifest.get("checks") or [] if not c.get("passed", True)]


def _process_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (Linux), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _process_start(pid: int) -> str | None:
    """The start time of process `pid` (Linux /proc), which tells a live owner from a reused pid."""
    fields = _process_stat(pid)
    return fields[19] if fields and len(fields) > 19 else None


def _owner_tag() -> str:
    return f"{os.getpid()}-{_process_start(os.getpid()) or 0}"


def _owner_alive(pid: int, start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user
        pass
    except OSError:
        return False
    fields = _process_stat(pid)
    if fields and fields[0] in ("Z", "X"):
        return False  # killed and not yet reaped: it writes nothing more
    if start and start != "0":
        actual = _process_start(pid)
        if actual is not None and actual != start:
            return False  # the pid was reused by another process
    return True


def _partials(out_dir: Path) -> Iterator[tuple[Path, bool, bool]]:
    """(path, is_old_copy, owner_alive) of every `.partial-` sibling that belongs to out_dir.

    Names are `.partial-NAME-PID-START` (being written) and `.partial-NAME-old-PID-START` (the
    previous version set aside while the new one is renamed in); `.partial-NAME-edge-...` belongs
    to another artifact and is not listed.
    """
    pattern = re.compile(re.escape(f"{TMP_MARK}{out_dir.name}-") + r"(old-)?(\d+)(?:-(\d+))?")
    try:
        entries = list(out_dir.parent.iterdir())
    except OSError:
        return
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match:
            yield entry, bool(match.group(1)), _owner_alive(int(match.group(2)), match.group(3))


def sweep_partials(out_dir: str | Path) -> list[Path]:
    """Remove the `.partial-*` leftovers of out_dir whose owner process is gone; return them.

    A partial whose owner still runs is left alone (another process is writing it). A previous
    version set aside by a process killed before it renamed the new one in is put back.
    """
    out_dir = Path(out_dir).resolve()
    removed = []
    for path, is_old, alive in sorted(_partials(out_dir), key=lambda item: not item[1]):
        if alive:
            continue
        if is_old and not out_dir.exists() and (path / MANIFEST).is_file():
            try:
                os.replace(path, out_dir)
            except OSError:
                pass  # keep the only copy rather than delete it
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def _await_replacement(path: Path, timeout: float = 5.0) -> None:
    """If path is missing because a live process has set the old version aside, wait for the new."""
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        if not any(is_old and alive for _, is_old, alive in _partials(path.absolute())):
            return
        time.sleep(0.01)


@contextlib.contextmanager
def atomic_artifact(out_dir: str | Path) -> Iterator[Path]:
    """Yield a temporary sibling of out_dir to write into; swap it into place on success.

    On any exception the temporary directory is removed and an existing out_dir is untouched.
    An existing out_dir is replaced with no moment where neither version is there: the two
    directories are exchanged in one step where the OS can (Linux), else the old one is renamed
    aside, the new one renamed in, and only then the old one deleted (readers of a missing
    out_dir wait for that). Leftovers of killed runs (`.partial-*` siblings, named after their
    owner process) are never mistaken for artifacts, and are swept on the next write once their
    owner is gone; a partial that a live process is writing is left alone.
    """
    out_dir = Path(out_dir).resolve()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    sweep_partials(out_dir)
    tag = _owner_tag()
    tmp = out_dir.parent / f"{TMP_MARK}{out_dir.name}-{tag}"
    if tmp.exists():  # our own leftover: one process writes one artifact at a time
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        yield tmp
        if not is_artifact(tmp):
            raise RuntimeError(f"stage wrote no {MANIFEST} into {tmp}")
        if out_dir.exists():
            if _exchange(tmp, out_dir):  # tmp now holds the old version
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                old = out_dir.parent / f"{TMP_MARK}{out_dir.name}-old-{tag}"
                os.replace(out_dir, old)
                os.replace(tmp, out_dir)
                shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_files(files: dict[Path, str | bytes]) -> None:
    """Write a set of files all or nothing (a report's markdown and JSON): every one to a temporary
    name first, then each renamed into place, so a full disk leaves none of them half-written."""
    temps = {path: path.with_name(f".{path.name}.{os.getpid()}.tmp") for path in files}
    try:
        for path, data in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            write = temps[path].write_text if isinstance(data, str) else temps[path].write_bytes
            write(data)
        for path, temp in temps.items():
            os.replace(temp, path)
    finally:
        for temp in temps.values():
            temp.unlink(missing_ok=True)


def safe_output_path(root: str | Path, relative: str | Path) -> Path:
    """Resolve `relative` under `root`, refusing paths (.., absolute, links) that escape it."""
    root = Path(root).resolve()
    target = (root / relative).resolve()
    if target != root and root not in target.parents:
        raise ShrinkbertError(f"path {relative!s} escapes the output directory {root}")
    return target
