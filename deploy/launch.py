"""`shrinkbert serve BUNDLE` and `shrinkbert.serve(bundle)`: a bundle over HTTP, run by the bundle's own
serve.py, so the kit and a bundle copied elsewhere serve with the same code (deploy/serve.py is what
every bundle gets). A bundle written before it held serve.py is served by the kit's copy.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.deploy import serve as kit_server

PROG = "shrinkbert serve"


def server_module(bundle: str | Path):
    """The bundle's serve.py as a module (the kit's deploy/serve.py where the bundle has none)."""
    path = Path(bundle) / "serve.py"
    if not path.is_file():
        return kit_server
    spec = importlib.util.spec_from_file_location("shrinkbert_bundle_serve", path)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # its dataclasses look themselves up
    spec.loader.exec_module(module)
    return module


def serve(bundle: str | Path, host: str = "127.0.0.1", port: int = 8080, workers: int = 0, threads: int = 0,
          max_batch_rows: int = 32, max_batch_tokens: int = 8192, max_wait_ms: float = 0.0, queue_size: int = 128,
          api_key: str = "", **options) -> int:
    """Serve `bundle` over HTTP until SIGTERM or Ctrl-C; returns the exit code (0 once drained).

    Args:
        bundle: the bundle folder (`shrinkbert bundle`'s output).
        host: the address to bind; 127.0.0.1 answers this machine only, 0.0.0.0 the network.
        port: the port to bind.
        workers: worker processes, each with its own model and queue; one that dies is replaced (0: one per core).
        threads: ONNX Runtime threads per model call (0: the cores divided among workers x instances).
        max_batch_rows: most rows per model call.
        max_batch_tokens: most padded tokens (rows x longest text) per model call.
        max_wait_ms: how long a row waits for others to fill its batch (0: run what queued while the model ran).
        queue_size: rows waiting per worker; past it a request gets 429 with Retry-After.
        api_key: required as `Authorization: Bearer KEY` on every route but /health (empty: none, unless
            $SHRINKBERT_API_KEY is set).
        **options: the server's other options (serve.py's `Options`: max_client_batch, max_input_chars,
            max_body_bytes, auto_truncate, drain_timeout, spin, instances, max_queue_ms, max_connections,
            access_log).

    Returns:
        The server's exit code: 0 after a drained shutdown, 2 where the bundle is damaged or not a bundle.

    Raises:
        ShrinkbertError: an option the bundle's server does not have.
    """
    module = server_module(bundle)
    known = {f.name for f in dataclasses.fields(module.Options)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ShrinkbertError(f"serve: unknown option(s) {', '.join(unknown)}; options: {', '.join(sorted(known))}")
    return module.run(module.Options(bundle=str(bundle), host=host, port=port, workers=workers, threads=threads,
                                     max_batch_rows=max_batch_rows, max_batch_tokens=max_batch_tokens,
                                     max_wait_ms=max_wait_ms, queue_size=queue_size, api_key=api_key, **options))


def main(argv: list[str] | None = None) -> int:
    """`shrinkbert serve BUNDLE [options]`: the options of the bundle's serve.py (`--help` lists them)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    opts = kit_server.options_from(argv, prog=PROG, bundle_positional=True)  # --help and bad options end here
    module = server_module(opts.bundle)
    known = {f.name for f in dataclasses.fields(module.Options)}
    defaults = kit_server.Options()
    unread = [name for name in vars(opts) if name not in known and getattr(opts, name) != getattr(defaults, name)]
    if unread:  # a bundle written by an older kit: its server lacks the option, so it is refused, not ignored
        print(f"error: {opts.bundle}/serve.py has no --{unread[0].replace('_', '-')}; write the bundle again to "
              "get the kit's server", file=sys.stderr)
        return 2
    return module.run(module.Options(**{name: value for name, value in vars(opts).items() if name in known}))
