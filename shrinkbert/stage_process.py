"""How the recipe runner starts a stage: a fork of the runner, or a fresh interpreter.

Every stage is a process of its own (its memory is returned when it ends; a crash cannot take the
runner down), but a fresh `python -m MODULE` pays the imports of torch, transformers, datasets and
accelerate again each time: seconds a stage on the small machines this kit targets, which add up
over a recipe's stages. So on Linux the runner imports those libraries once and forks a child per stage,
which calls the stage module's `main(argv)` (what its `python -m` entry calls). The libraries start
no threads on import, so the fork is clean (the children start their own thread pools on first use).
`accelerate launch` stages and other platforms always get a fresh interpreter, and `--spawn` asks
for one everywhere.

A stage has no time limit unless $SHRINKBERT_STAGE_TIMEOUT (seconds) sets one (the tests do: a hung
gloo run must not hold CI until its own time limit); past it the stage is killed and the runner reports
exit code 124. A forked stage also dies with its runner (Linux PR_SET_PDEATHSIG), so a runner killed
by a timeout above it leaves no stage behind.
"""
from __future__ import annotations

import ctypes
import importlib
import os
import signal
import subprocess
import sys
import time
import traceback

# Imported once by the runner before the first forked stage; what every stage module imports.
PRELOADED = ("torch", "transformers", "transformers.models.bert.modeling_bert", "datasets", "accelerate",
             "safetensors.torch", "tqdm.auto")


TIMEOUT_ENV = "SHRINKBERT_STAGE_TIMEOUT"
TIMED_OUT = 124  # what coreutils' timeout returns


def stage_timeout() -> float | None:
    """Seconds a stage may run ($SHRINKBERT_STAGE_TIMEOUT), or None: no limit."""
    value = os.environ.get(TIMEOUT_ENV, "").strip()
    return float(value) if value and float(value) > 0 else None


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent (the runner) dies."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except OSError:  # not glibc: the stage outlives a killed runner, as before
        pass


def _timed_out(limit: float) -> int:
    print(f"error: the stage ran past {limit:g} s (${TIMEOUT_ENV}) and was killed", file=sys.stderr)
    return TIMED_OUT


def can_fork() -> bool:
    # Linux only: macOS system libraries are not fork-safe, Windows has no fork.
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def preload() -> None:
    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except ImportError:  # a stage that needs it will say so itself
            pass


def run_forked(module: str, args: list[str], env: dict[str, str]) -> int:
    """Run `python -m module args` in a forked child of this process (module.main(args), which
    every stage module has); its exit code."""
    sys.stdout.flush()
    sys.stderr.flush()  # unflushed output would be written twice: by the parent and by the child
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            _die_with_parent()
            os.environ.clear()
            os.environ.update(env)
            sys.argv = [module, *args]
            # Every stage module's `python -m` entry is `sys.exit(main())`: call that main. (runpy
            # would run the module a second time as __main__: the runner has imported it already,
            # to validate the stage's parameters.)
            code = importlib.import_module(module).main(args) or 0
        except SystemExit as done:
            if done.code is None or isinstance(done.code, int):
                code = done.code or 0
            else:  # sys.exit("message"): printed, exit 1, as the interpreter does
                print(done.code, file=sys.stderr)
        except BaseException:  # noqa: BLE001 - report it the way the interpreter would, then exit 1
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    limit = stage_timeout()
    deadline = time.monotonic() + limit if limit else None
    while True:
        done, status = os.waitpid(pid, 0 if deadline is None else os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return _timed_out(limit)
        time.sleep(0.1)


def run_stage_command(cmd: list[str], env: dict[str, str], fork: bool) -> int:
    """Run one stage command. A plain `python -m MODULE ...` is forked when allowed; anything else
    (accelerate launch) gets a fresh process."""
    if fork and can_fork() and len(cmd) >= 3 and cmd[0] == sys.executable and cmd[1] == "-m" \
            and not cmd[2].startswith("accelerate"):
        return run_forked(cmd[2], cmd[3:], env)
    limit = stage_timeout()
    try:
        return subprocess.call(cmd, env=env, timeout=limit)
    except subprocess.TimeoutExpired:  # call() has killed the child
        return _timed_out(limit)
