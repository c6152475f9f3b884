"""A static embedding model as it is read and run: one vector per vocabulary token, a sentence is the
mean of its tokens' vectors, normalised.

One home for the static model's folder layout and its inference, read by every room that opens one:
the bundle stage (its vector table goes into the bundle), eval (a static variant) and the students
room, whose StaticEmbedder (students/static.py) builds and tunes the table on top of this class.

The folder is sentence-transformers' (StaticEmbedding -> Normalize), so `SentenceTransformer(path)`
loads it too: `0_StaticEmbedding/model.safetensors` holds the table as "embedding.weight",
`0_StaticEmbedding/tokenizer.json` the teacher's tokenizer.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file
from tokenizers import Tokenizer

from shrinkbert.compress.static_predictor import embed_with_table
from shrinkbert.compress.token_ids import WordIds
from shrinkbert.core.kinds.embedder import MODULES_FILE, ST_MODULE
from shrinkbert.core.errors import ShrinkbertError

STATIC_DIR, NORMALIZE_DIR = "0_StaticEmbedding", "1_Normalize"
WEIGHTS_FILE, TOKENIZER_FILE, WEIGHTS_KEY = "model.safetensors", "tokenizer.json", "embedding.weight"


def is_static_model(path: str | Path) -> bool:
    """Whether the folder `path` holds a static embedding model (its StaticEmbedding module folder)."""
    return (Path(path) / STATIC_DIR).is_dir()


class StaticTable:
    """A token-vector table and a tokenizer: `encode(texts)` -> float32 [n, dim], unit rows."""

    def __init__(self, vectors: np.ndarray, tokenizer: Tokenizer):
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.tokenizer = tokenizer
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()  # a mean has no length limit
        self.word_ids = WordIds(self.tokenizer)

    @property
    def dim(self) -> int:
        return self.vectors.shape[1]

    @classmethod
    def load(cls, path: str | Path):
        """The static model saved in the folder `path`."""
        folder = Path(path) / STATIC_DIR
        if not (folder / WEIGHTS_FILE).is_file() or not (folder / TOKENIZER_FILE).is_file():
            raise ShrinkbertError(f"{path} is not a static embedding model (no {STATIC_DIR}/{WEIGHTS_FILE} "
                                  f"and {TOKENIZER_FILE})")
        return cls(load_file(str(folder / WEIGHTS_FILE))[WEIGHTS_KEY], Tokenizer.from_file(str(folder / TOKENIZER_FILE)))

    def save(self, out_dir: str | Path) -> None:
        """The sentence-transformers layout (StaticEmbedding -> Normalize) into out_dir."""
        out_dir = Path(out_dir)
        (out_dir / STATIC_DIR).mkdir(parents=True, exist_ok=True)
        (out_dir / NORMALIZE_DIR).mkdir(exist_ok=True)
        save_file({WEIGHTS_KEY: self.vectors}, str(out_dir / STATIC_DIR / WEIGHTS_FILE))
        self.tokenizer.save(str(out_dir / STATIC_DIR / TOKENIZER_FILE))
        modules = [{"idx": 0, "name": "0", "path": STATIC_DIR, "type": ST_MODULE + "StaticEmbedding"},
                   {"idx": 1, "name": "1", "path": NORMALIZE_DIR, "type": ST_MODULE + "Normalize"}]
        (out_dir / MODULES_FILE).write_text(json.dumps(modules, indent=2))

    def encode(self, texts: list[str]) -> np.ndarray:
        """float32 [n, dim] unit vectors: the bundle's own inference (compress/static_predictor.py)."""
        return embed_with_table(self.word_ids, self.vectors, texts)
