"""A transformer as a sentence embedder: one home for pooling, normalisation and the
sentence-transformers folder layout.

An embedding artifact is a sentence-transformers model folder: the transformers files at its root,
`modules.json` naming Transformer -> Pooling (-> Dense) (-> Normalize), `1_Pooling/config.json`,
`2_Dense/` (a linear projection of the pooled vector: a narrower student's map into its teacher's
vector space, students/embedding_distill.py) and `2_Normalize/` (or `3_Normalize/` after a Dense). `SentenceTransformer(path)` loads it as it is, and so does `Embedder` here. A
model without `modules.json` (a plain BERT) is read as mean pooling, then L2 normalisation:
sentence-transformers' own default pooling, and the normalised vectors the kit's bundles return.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shrinkbert.core.builtin import resolve_model
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.models import load_model, load_tokenizer
from shrinkbert.core.quiet import unused_pooler_quiet

MODULES_FILE = "modules.json"
POOLING_DIR, NORMALIZE_DIR, DENSE_DIR = "1_Pooling", "2_Normalize", "2_Dense"
DENSE_WEIGHTS = "model.safetensors"  # sentence-transformers' Dense: "linear.weight", "linear.bias"
IDENTITY = "torch.nn.modules.linear.Identity"
ST_MODULE = "sentence_transformers.models."
# sentence-transformers' Pooling config keys, in the order it writes them, and the kit's mode names.
POOLING_KEYS = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
                "pooling_mode_max_tokens": "max", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len"}
POOLING_MODES = tuple(POOLING_KEYS.values())


def module_folders(source: Path) -> list[str]:
    """The sentence-transformers module folders (pooling, dense, normalise) a model folder names."""
    if not (Path(source) / MODULES_FILE).is_file():
        return []
    return [module["path"] for module in json.loads((Path(source) / MODULES_FILE).read_text()) if module.get("path")]


@dataclass(frozen=True)
class PoolingSpec:
    """How token vectors become one sentence vector: the pooling mode, then L2 normalisation or not."""
    mode: str = "mean"
    normalize: bool = True
    dense: str = ""  # the folder of a Dense module (a linear projection after pooling), "" for none


def read_pooling(path: str | Path) -> PoolingSpec:
    """The pooling a model folder declares in its sentence-transformers files; mean + normalise without them."""
    path = Path(path)
    modules_file = path / MODULES_FILE
    if not modules_file.is_file():
        return PoolingSpec()
    try:
        modules = json.loads(modules_file.read_text())
        types = [module["type"].rsplit(".", 1)[-1] for module in modules]
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ShrinkbertError(f"{modules_file} is not a sentence-transformers modules list ({err})") from None
    unknown = [name for name in types if name not in ("Transformer", "Pooling", "Dense", "Normalize")]
    if unknown:
        raise ShrinkbertError(f"{modules_file} names module(s) {unknown} this kit cannot run "
                              "(it runs Transformer -> Pooling -> Dense -> Normalize)")
    dense = ""
    if "Dense" in types:
        dense = modules[types.index("Dense")].get("path", DENSE_DIR)
        config = json.loads((path / dense / "config.json").read_text()) if (path / dense / "config.json").is_file() else {}
        if config.get("activation_function", IDENTITY) != IDENTITY:
            raise ShrinkbertError(f"{path / dense} applies {config['activation_function']}; this kit runs a "
                                  "linear Dense (Identity activation) only")
    mode = "mean"
    if "Pooling" in types:
        pooling_dir = path / modules[types.index("Pooling")].get("path", POOLING_DIR)
        config = json.loads((pooling_dir / "config.json").read_text()) if (pooling_dir / "config.json").is_file() else {}
        chosen = [name for key, name in POOLING_KEYS.items() if config.get(key)]
        if len(chosen) > 1:
            raise ShrinkbertError(f"{pooling_dir} combines pooling modes {chosen}; this kit runs one")
        mode = chosen[0] if chosen else "mean"
    return PoolingSpec(mode=mode, normalize="Normalize" in types, dense=dense)


def load_dense(path: str | Path, spec: PoolingSpec):
    """The torch Linear of the folder's Dense module (None without one)."""
    if not spec.dense:
        return None
    import torch  # deferred with torch (see pool)
    from safetensors.torch import load_file

    folder = Path(path) / spec.dense
    config = json.loads((folder / "config.json").read_text())
    weights = load_file(str(folder / DENSE_WEIGHTS))
    linear = torch.nn.Linear(config["in_features"], config["out_features"], bias=config.get("bias", True))
    linear.load_state_dict({name.removeprefix("linear."): value for name, value in weights.items()})
    return linear


def write_dense(folder: str | Path, linear) -> None:
    """A torch Linear as sentence-transformers' Dense module (Identity activation) in `folder`."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = {"in_features": linear.in_features, "out_features": linear.out_features,
              "bias": linear.bias is not None, "activation_function": IDENTITY}
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    tensors = {"linear.weight": linear.weight.detach().contiguous().cpu()}
    if linear.bias is not None:
        tensors["linear.bias"] = linear.bias.detach().contiguous().cpu()
    save_file(tensors, str(folder / DENSE_WEIGHTS))


def pool(hidden, attention_mask, mode: str = "mean"):
    """Token vectors [batch, seq, dim] -> sentence vectors [batch, dim], padding ignored (torch tensors)."""
    import torch  # deferred: the static student and the bundles use this module's numpy half only

    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    if mode == "cls":
        return hidden[:, 0]
    if mode == "max":
        return hidden.masked_fill(mask == 0, torch.finfo(hidden.dtype).min).max(dim=1).values
    summed, counts = (hidden * mask).sum(dim=1), mask.sum(dim=1).clamp(min=1e-9)
    if mode == "mean":
        return summed / counts
    if mode == "mean_sqrt_len":
        return summed / counts.sqrt()
    raise ShrinkbertError(f"unknown pooling mode '{mode}' (known: {', '.join(POOLING_MODES)})")


def write_st_layout(out_dir: str | Path, spec: PoolingSpec, dim: int, max_seq_length: int = 256,
                    dense=None) -> None:
    """Write modules.json, 1_Pooling/, 2_Dense/ (given a torch Linear `dense`) and the Normalize folder
    beside transformers files already in out_dir; `dim` is the encoder's hidden size."""
    out_dir = Path(out_dir)
    modules = [{"idx": 0, "name": "0", "path": "", "type": ST_MODULE + "Transformer"},
               {"idx": 1, "name": "1", "path": POOLING_DIR, "type": ST_MODULE + "Pooling"}]
    if dense is not None:
        modules.append({"idx": 2, "name": "2", "path": DENSE_DIR, "type": ST_MODULE + "Dense"})
        write_dense(out_dir / DENSE_DIR, dense)
    if spec.normalize:
        index = len(modules)
        folder = NORMALIZE_DIR if dense is None else f"{index}_Normalize"
        modules.append({"idx": index, "name": str(index), "path": folder, "type": ST_MODULE + "Normalize"})
        (out_dir / folder).mkdir(exist_ok=True)
    (out_dir / MODULES_FILE).write_text(json.dumps(modules, indent=2))
    (out_dir / POOLING_DIR).mkdir(exist_ok=True)
    pooling = {"word_embedding_dimension": dim, **{key: name == spec.mode for key, name in POOLING_KEYS.items()}}
    (out_dir / POOLING_DIR / "config.json").write_text(json.dumps(pooling, indent=2))
    (out_dir / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False}, indent=2))


class Embedder:
    """A transformers encoder with its pooling: `encode(texts)` -> float32 [n, dim] sentence vectors."""

    def __init__(self, model, tokenizer, spec: PoolingSpec, max_length: int = 128, dense=None):
        self.model, self.tokenizer, self.spec, self.max_length = model.eval(), tokenizer, spec, max_length
        self.dense = dense.eval() if dense is not None else None  # torch Linear after pooling, or None

    @classmethod
    def load(cls, path: str | Path, max_length: int = 128, eager: bool = False) -> "Embedder":
        """The encoder (AutoModel: a classifier's head is dropped) and the pooling its folder declares."""
        from transformers import AutoModel  # deferred: heavy, and only the torch path needs it

        path = resolve_model(str(path))
        with unused_pooler_quiet():  # a pooler the file does not hold is never used: dropped below
            model, info = load_model(AutoModel, path, output_loading_info=True,
                                     **({"attn_implementation": "eager"} if eager else {}))
        missing = info.get("missing_keys") or []
        if missing and all(key.startswith("pooler.") for key in missing):
            model.pooler = None  # random weights, and sentence vectors pool the last hidden states instead
        spec = read_pooling(path)
        return cls(model, load_tokenizer(path, model.config), spec, max_length, load_dense(path, spec))

    def to(self, device) -> "Embedder":
        """The encoder (and projection) on `device`; `encode` then runs there."""
        self.model.to(device)
        if self.dense is not None:
            self.dense.to(device)
        return self

    @property
    def device(self):
        """Where the encoder's weights are (a teacher on the GPU takes its batches there)."""
        return next(self.model.parameters()).device

    @property
    def dim(self) -> int:
        return self.dense.out_features if self.dense is not None else self.model.config.hidden_size

    def forward(self, batch: dict, normalize: bool | None = None):
        """Tokenized batch (torch tensors) -> sentence vectors (torch), pooled, projected and normalised
        as declared (normalize=False: the vectors before normalisation, the distillation target);
        differentiable, for the distillation loss."""
        import torch.nn.functional as F  # deferred with torch (see pool)

        from shrinkbert.core.predict import encoder_inputs

        inputs = {name: value.to(self.device) for name, value in encoder_inputs(self.model, batch).items()}
        hidden = self.model(**inputs).last_hidden_state
        vectors = pool(hidden, inputs["attention_mask"], self.spec.mode)
        if self.dense is not None:
            vectors = self.dense(vectors)
        normalize = self.spec.normalize if normalize is None else normalize
        return F.normalize(vectors, p=2, dim=-1) if normalize else vectors

    def encode(self, texts: list[str], batch_size: int = 64, normalize: bool | None = None,
               desc: str | None = None) -> np.ndarray:
        """Sentence vectors [n, dim] in float32; `desc`: a progress bar of that name over the batches
        (a teacher's vectors of a corpus take minutes on a CPU)."""
        import torch  # deferred with torch (see pool)

        from shrinkbert.core.progress import progress_bar

        texts = list(texts)
        # batches of similar lengths pad little (padding is masked out of the pooling either way)
        order = sorted(range(len(texts)), key=lambda row: len(texts[row]))
        chunks = []
        starts = range(0, len(texts), batch_size)
        with torch.inference_mode():
            for start in (progress_bar(starts, desc=desc, unit="batch") if desc else starts):
                batch = self.tokenizer([texts[row] for row in order[start:start + batch_size]], padding=True,
                                       truncation=True, max_length=self.max_length, return_tensors="pt")
                chunks.append(self.forward(batch, normalize).float().cpu().numpy())
        if not chunks:
            return np.zeros((0, self.dim), np.float32)
        vectors = np.empty((len(texts), self.dim), np.float32)
        vectors[order] = np.concatenate(chunks)
        return vectors
