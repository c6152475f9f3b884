"""One uniform runner per artifact kind: PyTorch dir, ONNX dir (Optimum layout), edge bundle.

Every runner answers the same three calls, so the harness never asks what it is holding:

    runner.encode(texts, pairs, max_length, pad_to=None) -> inputs   (tokenized, ready to run)
    runner.forward(inputs) -> logits (np.ndarray [batch, labels])    (the timed call: model only)
    runner.predict(texts, pairs, max_length) -> logits               (end to end, for accuracy)

A token classifier (tagging) is timed the same way (forward on encoded texts; its logits are
[batch, seq, labels]) and scored through one more call:

    runner.predict_words(word_lists, max_length) -> (logits [words, labels], scored word indices per row)

one logits row per word (its first sub-token, core/kinds/tagging.py), row after row; words past
max_length (and words the tokenizer turns into nothing) are not scored, and the indices say which
of each row's gold tags to keep.

A model with several outputs (extractive QA: start and end logits) is scored through

    runner.forward_outputs(inputs) -> {output name: np.ndarray}   (every named output)
    runner.own_answers(questions, contexts) -> [answer dicts] or None  (a QA bundle's own answer())

the task kind (core/kinds) encoding the inputs with `runner.tokenizer` and reading the outputs.

Threads are set explicitly for both runtimes (STACK.md): torch intra-op threads, and ORT
intra_op_num_threads with spinning off, so an ORT session does not slow the next torch call.
These runners load, encode and score in the harness's process; the report's latency is timed in a
process per variant (eval.worker), with the settings each variant ships with.
"""
from __future__ import annotations

import importlib.util
import inspect
import json
import uuid
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from shrinkbert.compress.bundle_files import runs_on_caller
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds import kind_of_architectures
from shrinkbert.core.models import count_parameters, load_model, load_tokenizer
from shrinkbert.core.ortsession import graph_feed, ort_session
from shrinkbert.core.kinds.tagging import encode_words, encoded_word_ids, first_positions, gather_words

KINDS = ("pytorch", "onnx", "bundle")
WEIGHT_SUFFIXES = (".safetensors", ".onnx", ".onnx_data", ".onnx.data", ".bin")


def artifact_kind(path: str | Path):
    """The task kind (core/kinds) whose model class the artifact's config.json (PyTorch or ONNX dir)
    names; the default kind when it names none or cannot be read."""
    try:
        config = json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError):
        config = {}
    return kind_of_architectures(config.get("architectures") if isinstance(config, dict) else None)


def detect_kind(path: str | Path) -> str:
    """'bundle' (predict.py + labels.json), 'onnx' (*.onnx) or 'pytorch' (config.json + safetensors)."""
    path = Path(path)
    if not path.exists():
        raise ShrinkbertError(f"artifact {path} does not exist")
    if not path.is_dir():
        raise ShrinkbertError(f"{path} is a file, not an artifact directory")
    if (path / "predict.py").is_file() and (path / "labels.json").is_file():
        return "bundle"
    if any(path.glob("*.onnx")):
        return "onnx"
    if (path / "config.json").is_file():
        return "pytorch"
    raise ShrinkbertError(f"{path} is not a model artifact: no config.json, no *.onnx, "
                          "no predict.py + labels.json")


def pick_onnx_file(path: Path, manifest: dict[str, Any] | None = None) -> Path:
    """The graph an ONNX artifact means: named in its manifest, else model.onnx, else the only *.onnx."""
    manifest = manifest or {}
    for key in ("onnx_file", "model_file"):
        name = manifest.get(key) or (manifest.get("config") or {}).get(key)
        if isinstance(name, str) and (path / name).is_file():
            return path / name
    if (path / "model.onnx").is_file():
        return path / "model.onnx"
    graphs = sorted(path.glob("*.onnx"))
    if len(graphs) == 1:
        return graphs[0]
    raise ShrinkbertError(f"{path} holds several ONNX graphs ({', '.join(g.name for g in graphs)}) "
                          "and its shrinkbert.json names none ('onnx_file')")


def onnx_parameter_count(model_file: Path) -> int:
    """Elements in the graph's initializers (weights, int8 ones included), read without the data."""
    import onnx

    graph = onnx.load(str(model_file), load_external_data=False).graph
    return int(sum(int(np.prod(init.dims)) if len(init.dims) else 1 for init in graph.initializer))


class Runner:
    kind = "?"

    def __init__(self, path: Path, threads: int, manifest: dict[str, Any] | None = None):
        self.path = Path(path)
        self.threads = threads
        self.manifest = manifest or {}

    # -- the uniform interface -------------------------------------------------------------
    def encode(self, texts: Sequence[str], pairs: Sequence[str] | None, max_length: int,
               pad_to: int | None = None) -> dict[str, Any]:
        raise NotImplementedError

    def forward(self, inputs: dict[str, Any]) -> np.ndarray:
        raise NotImplementedError

    def predict(self, texts: Sequence[str], pairs: Sequence[str] | None, max_length: int) -> np.ndarray:
        return self.forward(self.encode(texts, pairs, max_length))

    def predict_words(self, words: Sequence[Sequence[str]], max_length: int) -> tuple[np.ndarray, list[list[int]]]:
        """(one logits row per word that fits in max_length, the scored words' indices per row)."""
        encoded = encode_words(self.tokenizer, [list(w) for w in words], max_length, padding="longest",
                               return_tensors="np")
        word_ids = encoded_word_ids(encoded, len(words))
        logits = np.asarray(self.forward(self._prepare({k: np.asarray(v, dtype=np.int64) for k, v in encoded.items()})))
        if logits.ndim != 3:
            raise ShrinkbertError(f"the model returned logits of shape {logits.shape}: a sequence classifier "
                                  "cannot tag words (a token task needs a token classifier)")
        return gather_words(logits, word_ids), [_scored_words(ids) for ids in word_ids]

    def _prepare(self, encoded: dict[str, np.ndarray]) -> dict[str, Any]:
        """Tokenizer output (int64 arrays) as this runner's forward takes it."""
        raise NotImplementedError

    def prepare(self, encoded: dict[str, np.ndarray]) -> dict[str, Any]:
        """Model inputs (int64 arrays, e.g. a task kind's own encoding) as this runner's forward takes them."""
        return self._prepare({k: np.asarray(v, dtype=np.int64) for k, v in encoded.items()})

    def forward_outputs(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        """Every named output of the model for prepared inputs (QA: start_logits and end_logits)."""
        raise NotImplementedError

    def own_answers(self, questions: Sequence[str], contexts: Sequence[str]) -> list[dict] | None:
        """Answers an artifact computes end to end with its own code (a QA bundle's Predictor.answer);
        None: the kit scores the model's outputs itself."""
        return None

    def model_files(self) -> list[Path]:
        return sorted(p for p in self.path.iterdir() if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES))

    def num_parameters(self) -> int | None:
        return None

    def max_positions(self) -> int | None:
        return None

    def id2label(self) -> dict[int, str] | None:
        """The model's own label names by output index, where it declares them."""
        return None

    def describe(self) -> str:
        return self.kind

    def close(self) -> None:
        pass

    # -- shared helpers ----------------------------------------------------------------------
    def _hf_encode(self, tokenizer, texts, pairs, max_length, pad_to) -> dict[str, np.ndarray]:
        length = pad_to or max_length
        encoded = tokenizer(list(texts), list(pairs) if pairs is not None else None,
                            padding="max_length" if pad_to else "longest", truncation=True,
                            max_length=length, return_tensors="np")
        return {k: np.asarray(v, dtype=np.int64) for k, v in encoded.items()}


class TorchRunner(Runner):
    """A transformers save_pretrained directory, run eagerly (no compile) under inference_mode, in fp32
    on the CPU or on a GPU (device "cuda"); outputs come back as NumPy arrays, so a timed GPU call
    includes the wait for its result, as a caller's would."""

    kind = "pytorch"

    def __init__(self, path, threads, manifest=None, attention: str = "eager", device: str = "cpu"):
        super().__init__(path, threads, manifest)
        import torch

        torch.set_num_threads(threads)
        self.attention = attention
        self.device = torch_device(device)
        self.task_kind = artifact_kind(self.path)  # loaded with its own head (a token classifier: logits per sub-token)
        model = load_model(self.task_kind.model_class(), self.path, attn_implementation=attention)
        self.model = model.to(self.device).eval()
        self.tokenizer = load_tokenizer(self.path, self.model.config)

    def encode(self, texts, pairs, max_length, pad_to=None):
        return self._prepare(self._hf_encode(self.tokenizer, texts, pairs, max_length, pad_to))

    def _prepare(self, encoded):
        import torch

        from shrinkbert.core.predict import encoder_inputs  # DistilBERT, MPNet, ModernBERT: no token types

        return encoder_inputs(self.model, {k: torch.from_numpy(v).to(self.device) for k, v in encoded.items()})

    def forward(self, inputs):
        import torch

        with torch.inference_mode():  # the first output: a classifier's logits, a QA model's start logits
            return self.model(**inputs).to_tuple()[0].cpu().numpy()

    def forward_outputs(self, inputs):
        import torch

        with torch.inference_mode():
            out = self.model(**inputs)
        return {name: value.float().cpu().numpy() for name, value in out.items() if isinstance(value, torch.Tensor)}

    def model_files(self):
        return sorted(self.path.glob("*.safetensors"))

    def num_parameters(self):
        return count_parameters(self.model)

    def max_positions(self):
        return getattr(self.model.config, "max_position_embeddings", None)

    def id2label(self):
        return _int_keys(getattr(self.model.config, "id2label", None))

    def describe(self):
        import torch

        described = self.task_kind.description.replace("classification", "classifier")
        where = "" if self.device.type == "cpu" else f", on {torch.cuda.get_device_name(self.device)}"
        return f"pytorch fp32 eager, attention={self.attention}{where}" + (f", {described}" if described else "")

    def close(self):
        self.model = None


class OnnxRunner(Runner):
    """An Optimum-layout directory (graph + config.json + tokenizer) run by an InferenceSession."""

    kind = "onnx"

    def __init__(self, path, threads, manifest=None):
        super().__init__(path, threads, manifest)

        self.model_file = pick_onnx_file(self.path, self.manifest)
        self.session = ort_session(self.model_file, threads)
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.tokenizer = load_tokenizer(self.path)
        config_file = self.path / "config.json"
        self.config = json.loads(config_file.read_text()) if config_file.is_file() else {}

    def encode(self, texts, pairs, max_length, pad_to=None):
        encoded = self._hf_encode(self.tokenizer, texts, pairs, max_length, pad_to)
        return graph_feed(encoded, self.input_names)

    def _prepare(self, encoded):
        return graph_feed(encoded, self.input_names)

    def forward(self, inputs):
        return self.session.run(None, inputs)[0]

    def forward_outputs(self, inputs):
        return dict(zip([o.name for o in self.session.get_outputs()], self.session.run(None, inputs)))

    def model_files(self):
        data = [p for p in self.path.iterdir() if p.name.startswith(self.model_file.name) and p != self.model_file]
        return [self.model_file] + sorted(data)

    def num_parameters(self):
        return onnx_parameter_count(self.model_file)

    def max_positions(self):
        return self.config.get("max_position_embeddings")

    def id2label(self):
        return _int_keys(self.config.get("id2label"))

    def describe(self):
        return f"onnxruntime {self.model_file.name}"

    def close(self):
        self.session = None


def load_bundle_module(path: Path):
    """Import the bundle's own predict.py under a unique module name (no sys.path changes)."""
    spec = importlib.util.spec_from_file_location(f"shrinkbert_bundle_{uuid.uuid4().hex[:8]}", path / "predict.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        raise ShrinkbertError(f"cannot import {path / 'predict.py'}: {type(err).__name__}: {err}") from None
    if not hasattr(module, "Predictor"):
        raise ShrinkbertError(f"{path / 'predict.py'} defines no Predictor class")
    return module


def call_with_supported(fn, *args, **optional):
    """Call fn with the optional keyword arguments its signature accepts."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn(*args)
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return fn(*args, **optional)
    return fn(*args, **{k: v for k, v in optional.items() if k in params})


class BundleRunner(Runner):
    """An edge bundle: accuracy through its own Predictor (its tokenizer, its truncation);
    latency through the Predictor's ORT session on fixed shapes (model only, like the others)."""

    kind = "bundle"

    def __init__(self, path, threads, manifest=None):
        super().__init__(path, threads, manifest)
        from tokenizers import Tokenizer

        module = load_bundle_module(self.path)
        try:
            # spin=False: in the harness's process the bundle shares the CPU with torch (STACK.md); its
            # latency is timed in a process of its own with its own defaults (eval.worker);
            # one thread: not flushing, which would flush this thread, PyTorch's too (bundle_files.open_session)
            self.predictor = call_with_supported(module.Predictor, str(self.path), num_threads=threads,
                                                  threads=threads, intra_op_num_threads=threads, spin=False,
                                                  flush_denormals=False if runs_on_caller(threads) else None)
        except ShrinkbertError:
            raise
        except Exception as err:
            raise ShrinkbertError(f"the bundle's Predictor failed to start: {type(err).__name__}: {err}") from None
        self.labels = json.loads((self.path / "labels.json").read_text())
        self.model_file = self.path / (self.labels.get("model_file", "model.onnx") if isinstance(self.labels, dict)
                                       else "model.onnx")
        session = getattr(self.predictor, "session", None)
        if session is None or not hasattr(session, "run"):
            session = ort_session(self.model_file, threads)
        self.session = session
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.tokenizer = Tokenizer.from_file(str(self.path / "tokenizer.json"))
        pad_id = self.labels.get("pad_token_id") if isinstance(self.labels, dict) else None
        self.pad_id = pad_id if isinstance(pad_id, int) else next(
            (self.tokenizer.token_to_id(t) for t in ("[PAD]", "<pad>") if self.tokenizer.token_to_id(t) is not None), 0)

    def encode(self, texts, pairs, max_length, pad_to=None):
        tok = self.tokenizer
        tok.enable_truncation(pad_to or max_length)
        if pad_to:
            tok.enable_padding(length=pad_to, pad_id=self.pad_id)
        else:
            tok.enable_padding(pad_id=self.pad_id)
        batch = list(zip(texts, pairs)) if pairs is not None else list(texts)
        encodings = tok.encode_batch(batch)
        encoded = {"input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
                   "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
                   "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64)}
        return graph_feed(encoded, self.input_names)

    def forward(self, inputs):
        return self.session.run(None, inputs)[0]

    def forward_outputs(self, inputs):
        return dict(zip([o.name for o in self.session.get_outputs()], self.session.run(None, inputs)))

    def own_answers(self, questions, contexts):
        """The bundle's own Predictor.answer (its tokenizer, windows and postprocessing), question by question."""
        answer = getattr(self.predictor, "answer", None)
        if answer is None:
            raise ShrinkbertError(f"{self.path / 'predict.py'}: its Predictor has no answer(question, context), so "
                                  "the bundle cannot answer questions (re-make it with this version of the bundle stage)")
        return [answer(question, context) for question, context in zip(questions, contexts)]

    def predict(self, texts, pairs, max_length):
        """Logits from the Predictor itself, so the bundle's own pre-processing is what is measured."""
        predictor = self.predictor
        texts = list(texts)
        pairs = list(pairs) if pairs is not None else None
        batch = list(zip(texts, pairs)) if pairs is not None else texts
        for name in ("logits", "predict_logits"):
            fn = getattr(predictor, name, None)
            if fn is None:
                continue
            try:
                takes_pairs = len(inspect.signature(fn).parameters) >= 2
            except (TypeError, ValueError):
                takes_pairs = False
            out = fn(texts, pairs) if takes_pairs else fn(batch)
            return np.asarray(out, dtype=np.float32)
        if hasattr(predictor, "predict_proba"):
            return np.log(np.clip(np.asarray(predictor.predict_proba(batch), dtype=np.float64), 1e-12, None))
        out = predictor.predict(batch)
        return _labels_to_onehot(out, self.labels)

    def predict_words(self, words, max_length):
        """Per-word logits from the Predictor's own word_logits (its tokenizer, its truncation at the
        bundle's max_length; `max_length` here is not used). Which words it scored is read from the
        bundle's tokenizer.json at that length, and checked against the rows it returned."""
        fn = getattr(self.predictor, "word_logits", None)
        if fn is None:
            raise ShrinkbertError(f"{self.path / 'predict.py'}: its Predictor has no word_logits, so the bundle "
                                  "cannot tag words (re-make it with this version of the bundle stage)")
        words = [list(w) for w in words]
        out = fn(words)
        if isinstance(out, (list, tuple)) and len(out) == len(words) and all(np.ndim(o) == 2 for o in out):
            out = _concat([np.asarray(o, dtype=np.float32) for o in out])  # one array per row
        out = np.asarray(out, dtype=np.float32)
        if out.ndim != 2:
            raise ShrinkbertError(f"the bundle's word_logits returned shape {out.shape}; expected [words, labels]")
        scored = self._scored_words(words)
        if out.shape[0] != sum(len(s) for s in scored):
            raise ShrinkbertError(f"the bundle's word_logits returned {out.shape[0]} rows, but its tokenizer "
                                  f"(truncating at {self._bundle_max_length()}) keeps {sum(len(s) for s in scored)} "
                                  "words: cannot tell which words were scored")
        return out, scored

    def _bundle_max_length(self) -> int:
        length = self.labels.get("max_length") if isinstance(self.labels, dict) else None
        return int(length or getattr(self.predictor, "max_length", 0) or 128)

    def _scored_words(self, words: list[list[str]]) -> list[list[int]]:
        tok = self.tokenizer
        tok.enable_truncation(self._bundle_max_length())
        tok.no_padding()
        return [_scored_words(e.word_ids) for e in tok.encode_batch(words, is_pretokenized=True)]

    def model_files(self):
        return [self.model_file]

    def num_parameters(self):
        return onnx_parameter_count(self.model_file)

    def describe(self):
        return "edge bundle (predict.py Predictor; onnxruntime)"

    def id2label(self):
        return _int_keys(self.labels.get("id2label") if isinstance(self.labels, dict) else dict(enumerate(self.labels)))

    def close(self):
        self.session = None
        self.predictor = None


def _scored_words(word_ids) -> list[int]:
    """Indices of the words that start a sub-token (core.tagging.first_positions' words)."""
    return [int(word_ids[p]) for p in first_positions(word_ids)]


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros((0, 0), np.float32)


def _int_keys(mapping) -> dict[int, str] | None:
    try:
        return {int(k): str(v) for k, v in mapping.items()} if mapping else None
    except (AttributeError, TypeError, ValueError):
        return None


def _labels_to_onehot(out, labels) -> np.ndarray:
    """A Predictor that returns label names/ids/dicts: one-hot 'logits' so argmax recovers them."""
    if isinstance(labels, dict):
        id2label = labels.get("id2label", labels)
        names = [id2label[k] for k in sorted(id2label, key=lambda k: int(k))]
    else:
        names = list(labels)
    rows = []
    for item in out:
        if isinstance(item, dict):
            item = item.get("label", item.get("label_id"))
        index = names.index(item) if isinstance(item, str) else int(item)
        row = np.zeros(len(names), dtype=np.float32)
        row[index] = 1.0
        rows.append(row)
    return np.stack(rows)


def torch_device(name: str):
    """The torch device PyTorch variants run on: "cpu", or "cuda" (the first GPU), refused in one line
    where torch sees none."""
    import torch

    if name == "cpu":
        return torch.device("cpu")
    if name != "cuda":
        raise ShrinkbertError(f"torch device must be cpu or cuda, got {name!r}")
    if not torch.cuda.is_available():
        raise ShrinkbertError("--torch-device cuda: torch sees no CUDA device on this machine "
                              f"(torch {torch.__version__}, built for CUDA {torch.version.cuda or 'none'})")
    return torch.device("cuda", 0)


def open_runner(path: str | Path, threads: int, manifest: dict[str, Any] | None = None,
                attention: str = "eager", device: str = "cpu") -> Runner:
    path = Path(path)
    kind = detect_kind(path)
    if kind == "pytorch":
        return TorchRunner(path, threads, manifest, attention=attention, device=device)
    if kind == "onnx":
        return OnnxRunner(path, threads, manifest)
    return BundleRunner(path, threads, manifest)
