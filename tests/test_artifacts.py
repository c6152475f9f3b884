"""The artifact contract under concurrency: replacement never leaves the path empty, and the
sweep of `.partial-*` leftovers never touches one that a live process is writing."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from shrinkbert.core import artifacts
from shrinkbert.core.artifacts import MANIFEST, atomic_artifact, is_artifact, read_manifest, sweep_partials


def write(out: Path, version: int) -> None:
    with atomic_artifact(out) as tmp:
        (tmp / "weights.txt").write_text(f"v{version}")
        (tmp / MANIFEST).write_text(json.dumps({"stage": "fake", "version": version}))


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=60)
    return proc.pid


def test_replacement_is_one_exchange_where_the_os_has_one(tmp_path, monkeypatch):
    out = tmp_path / "art"
    write(out, 1)
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    if not artifacts._exchange(tmp_path / "a", tmp_path / "b"):
        pytest.skip("no RENAME_EXCHANGE on this OS or filesystem; the rename-aside path is tested below")
    (tmp_path / "a").rmdir(), (tmp_path / "b").rmdir()

    def no_replace(*args):
        raise AssertionError("out_dir was renamed away: there was a moment with no artifact")

    monkeypatch.setattr(artifacts.os, "replace", no_replace)
    write(out, 2)
    monkeypatch.undo()
    assert read_manifest(out)["version"] == 2 and (out / "weights.txt").read_text() == "v2"
    assert not list(tmp_path.glob(".partial-*"))


def test_readers_never_find_the_path_missing_while_it_is_replaced(tmp_path, monkeypatch):
    """The fallback (rename old aside, rename new in, delete old), with the gap held open: a reader
    in that gap waits for the new version instead of reporting a missing artifact."""
    out = tmp_path / "art"
    write(out, 1)
    monkeypatch.setattr(artifacts, "_exchange", lambda a, b: False)
    real_replace = artifacts.os.replace
    in_gap = threading.Event()

    def slow_replace(src, dst):
        real_replace(src, dst)
        if Path(dst).name.startswith(".partial-art-old-"):
            in_gap.set()
            time.sleep(0.5)

    monkeypatch.setattr(artifacts.os, "replace", slow_replace)
    writer = threading.Thread(target=write, args=(out, 2))
    writer.start()
    assert in_gap.wait(10)
    assert not out.exists()  # the gap is real ...
    assert is_artifact(out)  # ... and a reader waits it out
    assert read_manifest(out)["version"] == 2
    writer.join()
    assert not list(tmp_path.glob(".partial-*"))


def test_sweep_removes_only_partials_whose_owner_is_gone(tmp_path):
    out = tmp_path / "art"
    gone = dead_pid()
    live = tmp_path / f".partial-art-{artifacts._owner_tag()}"  # ours: a live owner
    stale = tmp_path / f".partial-art-{gone}-12345"
    stale_old_style = tmp_path / f".partial-art-{gone}"
    other = tmp_path / f".partial-art-edge-{gone}-1"  # another artifact's leftover
    for path in (live, stale, stale_old_style, other):
        path.mkdir()
        (path / "half.bin").write_bytes(b"x")
    # a live pid whose start time does not match is a reused pid: its partial is stale
    reused = tmp_path / f".partial-art-{artifacts.os.getpid()}-1"
    reused.mkdir()
    removed = sweep_partials(out)
    assert sorted(p.name for p in removed) == sorted(p.name for p in (stale, stale_old_style, reused))
    assert live.is_dir() and other.is_dir()


def test_sweep_puts_back_an_old_version_left_aside_by_a_killed_writer(tmp_path):
    out = tmp_path / "art"
    write(out, 1)
    aside = tmp_path / f".partial-art-old-{dead_pid()}-7"
    out.rename(aside)
    assert sweep_partials(out) == []
    assert read_manifest(out)["version"] == 1 and not aside.exists()


def test_a_live_writer_keeps_its_partial_while_another_replaces_the_artifact(tmp_path):
    out = tmp_path / "art"
    code = ("import sys, time; from shrinkbert.core.artifacts import atomic_artifact\n"
            "with atomic_artifact(sys.argv[1]) as tmp:\n"
            "    (tmp / 'started').write_text('1'); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(out)])
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(".partial-art-*/started")) and time.monotonic() < deadline:
            time.sleep(0.05)
        (theirs,) = [p.parent for p in tmp_path.glob(".partial-art-*/started")]
        write(out, 1)
        assert theirs.is_dir() and (theirs / "started").is_file()
    finally:
        proc.kill()
        proc.wait(timeout=60)
    write(out, 2)  # now its owner is gone: swept
    assert not theirs.exists() and read_manifest(out)["version"] == 2
