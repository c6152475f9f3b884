import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# Tests share 2 cores; one thread each keeps them predictable. The hub is never reachable.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# a hung stage (a gloo run waiting for a peer) is killed before pytest-timeout's 300 s takes the test
os.environ.setdefault("SHRINKBERT_STAGE_TIMEOUT", "280")
# distill's small-data defaults (8 teacher-labelled copies of each row) would make every tiny distil
# nine times longer; the suite runs them off, and tests/test_students.py switches them on where tested
os.environ.setdefault("SHRINKBERT_SMALL_DATA", "off")
# Dataset names (squad, sentence-transformers/stsb, snli:test) resolve from $SHRINKBERT_DATA, as for a user:
# here the shared copies beside the clone (CI has them), unless the run names another folder.
SHARED_DATA = ROOT.parent / "shared" / "data"
if not os.environ.get("SHRINKBERT_DATA") and SHARED_DATA.is_dir():
    os.environ["SHRINKBERT_DATA"] = str(SHARED_DATA)


def _shared_cache(run_id: str) -> Path:
    return Path(tempfile.gettempdir()) / f"shrinkbert-tests-{run_id}"


def _run_cache() -> str:
    """Each test run has its own shrinkbert cache, so no test reads or writes ~/.cache/shrinkbert (what a
    previous run left there cannot hide a bug); the real data is fetched from the registries once per
    run into it, and it is removed when the run ends (`pytest_unconfigure`). SHRINKBERT_TEST_CACHE names
    a cache to reuse across runs instead, which is kept. The workers of one `pytest -n` run
    (pytest-xdist) share that run's cache: the fetchers rename a finished archive into place, so two
    workers fetching the same one at once cannot half-write it."""
    if os.environ.get("SHRINKBERT_TEST_CACHE"):
        return os.environ["SHRINKBERT_TEST_CACHE"]
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run_id:
        return tempfile.mkdtemp(prefix="shrinkbert-tests-")
    shared = _shared_cache(run_id)
    shared.mkdir(exist_ok=True)
    return str(shared)


os.environ["SHRINKBERT_CACHE"] = _run_cache()
# The caches this process removes when the run ends: its own, and under xdist (in the controller, which
# outlives its workers) the one the workers share. A run's real data is a few hundred MB, and /tmp kept
# every run's until a developer's disk filled.
_caches_to_remove: set[str] = set() if os.environ.get("SHRINKBERT_TEST_CACHE") else {os.environ["SHRINKBERT_CACHE"]}


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist's controller, once per worker it starts: the run id that names the workers' shared cache."""
    if not os.environ.get("SHRINKBERT_TEST_CACHE"):
        _caches_to_remove.add(str(_shared_cache(node.workerinput["testrunuid"])))


def pytest_unconfigure(config):
    if hasattr(config, "workerinput"):  # a worker: its siblings may still read the shared cache
        return
    import shutil

    for cache in _caches_to_remove:
        shutil.rmtree(cache, ignore_errors=True)


@pytest.fixture(autouse=True)
def _torch_threads_as_found():
    """torch's intra-op threads back to OMP_NUM_THREADS after each test: eval's runners, the floor and
    a stage's --threads set them in this process, and a later test's in-process run must use the one
    thread its subprocesses use (the kill-and-resume tests compare the two bit for bit)."""
    yield
    torch = sys.modules.get("torch")
    threads = int(os.environ["OMP_NUM_THREADS"])
    if torch is not None and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    if torch is not None:  # a one-thread bundle's session flushes denormals on this thread (bundle_files)
        torch.set_flush_denormal(False)


def on_ci() -> bool:
    """Whether this run is CI's (CI=true, as GitHub Actions, GitLab and .ci/run set it)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def shared_data(relative: str = "") -> Path:
    """A path under the shared data copies (../shared/data beside the clone: SQuAD, STS-B, SNLI), skipping
    the test with its reason where they are absent, and failing it under CI=true, where they are always present."""
    path = SHARED_DATA / relative
    if not path.exists():
        reason = f"{path} is absent (the shared data copies are not beside the clone)"
        if on_ci():
            pytest.fail(f"{reason} (CI=true: real-data tests may not skip)", pytrace=False)
        pytest.skip(reason)
    return path


def fetch_or_skip(*names: str) -> None:
    """Fetch built-in archives into the run's cache. When a registry or its client (npm, apt-get, an
    apt list) is missing: a skip that says why on a developer's machine, a FAILURE under CI=true, so a
    slim runner cannot stay green while testing none of the real data."""
    from shrinkbert.core import builtin
    from shrinkbert.core.errors import ShrinkbertError

    for name in names:
        try:
            builtin.fetch(name)
        except ShrinkbertError as err:
            if "cannot fetch" not in str(err):
                raise
            reason = f"the real-data archive '{name}' cannot be fetched: {err}"
            if on_ci():
                pytest.fail(f"{reason} (CI=true: real-data tests may not skip)", pytrace=False)
            pytest.skip(reason)


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    """A random-init 2-layer BERT classifier artifact (hidden 32, 4 heads) with its tokenizer."""
    from fixtures import make_tiny_bert

    return make_tiny_bert(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def tiny_csv(tmp_path_factory) -> Path:
    """A labelled CSV (text,label) of 64 sentences whose label is set by one sentiment word."""
    from fixtures import write_tiny_csv

    return write_tiny_csv(tmp_path_factory.mktemp("data") / "tiny.csv")


def free_port() -> int:
    """A TCP port nobody listens on now (the OS picks it), for a process group's rendezvous."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture()
def cache_env(tmp_path, monkeypatch) -> Path:
    """A cache of the test's own (SHRINKBERT_CACHE), for tests that count or inspect what lands in it."""
    monkeypatch.setenv("SHRINKBERT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"
