"""How the recipe runner starts a stage: a fork of the runner, or a fresh interpreter.

Every stage is a process of its own (its memory is returned when it ends; a crash cannot take the
runner down), but a fresh `python -m MODULE` pays the imports of torch, transformers, datasets and
accelerate again each time: ~5 s a stage on the 2-core machines this kit targets, a minute over the
demo's 13 stages. So on Linux the runner imports those libraries once and forks a child per stage,
which calls the stage module's `main(argv)` (what its `python -m` entry calls). The libraries start
no threads on import, so the fork is clean (the children start their own thread pools on first use).
`accelerate launch` stages and other platforms always get a fresh interpreter, and `--spawn` asks
for one everywhere.
"""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
import traceback

# Imported once by the runner before the first forked stage; what every stage module imports.
PRELOADED = ("torch", "transformers", "transformers.models.bert.modeling_bert", "datasets", "accelerate",
             "safetensors.torch", "tqdm.auto")


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
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def run_stage_command(cmd: list[str], env: dict[str, str], fork: bool) -> int:
    """Run one stage command. A plain `python -m MODULE ...` is forked when allowed; anything else
    (accelerate launch) gets a fresh process."""
    if fork and can_fork() and len(cmd) >= 3 and cmd[0] == sys.executable and cmd[1] == "-m" \
            and not cmd[2].startswith("accelerate"):
        return run_forked(cmd[2], cmd[3:], env)
    return subprocess.call(cmd, env=env)
