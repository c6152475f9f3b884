"""The static embedding bundle: a static student (students/static.py) as a folder that runs with
numpy and tokenizers only.

Contents: vectors.npy (the token-vector table), tokenizer.json, predict.py (a copy of
compress/static_predictor.py: `Predictor.embed/similarity/search`, `python predict.py --embed`),
requirements.txt and shrinkbert.json. Before it is written, the bundle's own Predictor embeds
example sentences and must give the student's vectors exactly (same table, same tokenizer).

    python -m shrinkbert.compress.static_bundle --model runs/embedding/static-minilm-d256 --output-dir runs/bundle-static
"""
from __future__ import annotations

import argparse
import shutil
import sys
from importlib import metadata
from pathlib import Path

import numpy as np

from shrinkbert.compress import static_predictor
from shrinkbert.core.artifacts import atomic_artifact, check, write_manifest
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.students.static import StaticEmbedder

PARITY_SENTENCES = ["A man is playing a guitar.", "The stock market fell sharply today.",
                    "a cat sat on the mat", "", "Résumé naïve café — émigré!"]


def requirements() -> str:
    versions = {}
    for name, default in (("tokenizers", "0.15"), ("numpy", "1.24")):
        try:
            versions[name] = ".".join(metadata.version(name).split(".")[:2])
        except metadata.PackageNotFoundError:
            versions[name] = default
    return "".join(f"{name}>={version}\n" for name, version in versions.items())


def run(model: str | Path, output_dir: str | Path) -> Path:
    """Write the bundle of the static student at `model` into output_dir (atomically)."""
    if not output_dir:
        raise ShrinkbertError("give --output-dir for the bundle")
    student = StaticEmbedder.load(model)
    with atomic_artifact(output_dir) as tmp:
        np.save(tmp / static_predictor.VECTORS_FILE, student.vectors)
        student.tokenizer.save(str(tmp / static_predictor.TOKENIZER_FILE))
        shutil.copyfile(static_predictor.__file__, tmp / "predict.py")
        (tmp / "requirements.txt").write_text(requirements())
        gap = float(np.abs(static_predictor.Predictor(tmp).embed(PARITY_SENTENCES)
                           - student.encode(PARITY_SENTENCES)).max())
        if gap > 0:
            raise ShrinkbertError(f"the bundle's vectors differ from the student's by {gap:.2e}: not written")
        write_manifest(tmp, stage="bundle-static", parents=[model], num_parameters=int(student.vectors.size),
                       config={"model": str(model), "output_dir": str(output_dir)},
                       checks=[check("bundle_parity", True, f"{len(PARITY_SENTENCES)} sentences, max |diff| 0")],
                       extra={"kind": "embedding", "dim": student.dim, "runtime": "numpy"})
    return Path(output_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="bundle a static embedding student (numpy + tokenizers only)")
    parser.add_argument("--model", required=True, help="the static student's folder (distill --student static)")
    parser.add_argument("--output-dir", required=True)
    args = parser.parse_args(argv)
    try:
        print(run(args.model, args.output_dir))
    except ShrinkbertError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
