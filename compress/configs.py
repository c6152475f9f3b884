"""The compress stages' options: prune, sparsify, trim-vocab, export, quantize, bundle.

Only the options live here: no heavy import, so `shrinkbert STAGE --help` and the Python API's help
answer at once. The stage modules (compress/prune.py, sparsify.py, trim_vocab.py, export.py, quantize.py, bundle.py) import their Config from here.
"""
from __future__ import annotations

from dataclasses import dataclass

from shrinkbert.compress import int8
from shrinkbert.compress.bundle_runtime import SPIN_CHOICES
from shrinkbert.core.config import field
from shrinkbert.core.configs import DataConfig, max_length_field


@dataclass
class PruneConfig(DataConfig):
    model: str = field("", "PyTorch model artifact to prune", group="model")
    output_dir: str = field("", "where the pruned artifact is written", group="output")
    head_fraction: float = field(0.4, "fraction of attention heads to remove (of the model's current heads)", min=0, below=1)
    neuron_fraction: float = field(0.4, "fraction of FFN neurons to remove, the same count in every layer", min=0, below=1)
    head_scope: str = field("global", "rank heads 'global'ly (Michel et al.) or 'per_layer' (same count per layer)", choices=("global", "per_layer"))
    min_heads_per_layer: int = field(1, "never leave a layer with fewer heads than this", min=1)
    importance: str = field("taylor", "'taylor' (gradient x activation on task rows) or 'magnitude' (weights only, no data)", choices=("taylor", "magnitude"))
    importance_rows: int = field(256, "task rows (train split) used to score heads and neurons", min=1)
    max_eval_rows: int = field(256, "validation rows to score accuracy before/after (0: skip)", min=0)
    max_length: int | None = max_length_field()
    batch_size: int = field(16, "rows per scoring batch", min=1)


@dataclass
class SparsifyConfig(DataConfig):
    model: str = field("", "PyTorch model artifact to sparsify", group="model")
    output_dir: str = field("", "where the sparsified artifact is written", group="output")
    sparsity: float = field(0.5, "fraction of the selected weights set to zero", min=0, below=1)
    scope: str = field("global", "'global' (one magnitude threshold over all layers) or 'per_layer'", choices=("global", "per_layer"))
    include_embeddings: bool = field(False, "also sparsify the embedding matrices")
    include_classifier: bool = field(False, "also sparsify the classifier head")
    max_eval_rows: int = field(256, "validation rows for the accuracy check before/after (0: skip)", min=0)
    max_length: int | None = max_length_field()


@dataclass
class TrimVocabConfig(DataConfig):
    model: str = field("", "PyTorch model artifact whose vocabulary is trimmed", group="model")
    output_dir: str = field("", "where the trimmed artifact is written", group="output")
    corpus_files: list[str] = field([], "text files (one text per line) whose tokens are also kept")
    keep_tokens: list[str] = field([], "extra tokens to keep")
    keep_ascii_chars: bool = field(True, "keep single ASCII characters (and ##x) so unseen words split instead of [UNK]")
    max_train_rows: int = field(0, "cap on corpus texts (0: all)", min=0)
    max_unseen_unk_rate: float = field(0.001, "open-vocabulary tasks (QA): largest share of the test texts' tokens "
                                              "that may become [UNK] after trimming", min=0, max=1)
    max_unseen_token_increase: float = field(0.02, "open-vocabulary tasks (QA): largest relative growth of the test "
                                                   "texts' token count after trimming (words split into pieces)", min=0)


@dataclass
class ExportConfig(DataConfig):
    model: str = field("", "PyTorch model artifact to export", group="model")
    output_dir: str = field("", "where the ONNX artifact is written", group="output")
    parity_rows: int = field(64, "rows for the parity check", min=1)
    tolerance: float = field(1e-3, "largest allowed |logit difference| between ONNX and PyTorch", min=0)
    allow_parity_failure: bool = field(False, "write the artifact even when parity fails (recorded)")
    # O2 by default: the demo's path (O2 fusions, then dynamic int8) was both faster and closer to fp32
    # than the unfused one on its teacher (bench/compress.py measures both). Static int8, --exclude and
    # accuracy-aware quantization need the unfused graph: export with optimization none for those.
    optimization: str = field("O2", "ORTOptimizer level: none, O1 or O2 (fusions; static int8, --exclude and "
                                    "accuracy-aware quantize need none or O1)", choices=("none", "O1", "O2"))
    skip_layer_norm: str = field("auto", "ORT's residual Add + LayerNorm fusion (SkipLayerNormalization) after O1/O2: "
                                         "auto (time both graphs here and keep the faster), fused, or unfused "
                                         "(for a graph that will run on another host than this one)",
                                 choices=("auto", "fused", "unfused"))
    opset: int = field(0, "ONNX opset (0: Optimum's default for the model)", min=0)
    max_length: int | None = max_length_field()
    threads: int = field(0, "ONNX Runtime threads for the checks (0: ORT default)", min=0)


@dataclass
class QuantizeConfig(DataConfig):
    model: str = field("", "ONNX artifact (compress.export) to quantize", group="model")
    output_dir: str = field("", "where the int8 ONNX artifact is written", group="output")
    approach: str = field("dynamic", "'dynamic', 'static' (calibrated activations) or 'int4' (weight-only MatMulNBits, a size option)",
                          choices=("dynamic", "static", "int4"))
    calibration: str = field("percentile", "static calibration: minmax, entropy or percentile (percentile, the default, kept the most accuracy where bench/int8.py compares them)",
                             choices=int8.CALIBRATIONS)
    percentile: float = field(99.999, "percentile for percentile calibration", above=0, max=100)
    calibration_rows: int = field(128, "train rows used for static calibration", min=1)
    min_calibration_rows: int = field(32, "refuse a calibration set smaller than this", min=1)
    calibration_data: str = field("", "optional .npz of pre-tokenized inputs (input_ids, attention_mask, ...) to calibrate on")
    per_channel: bool | None = field(None, "per-channel weight scales (else per-tensor); unset: the ISA decides (per-channel)")
    reduce_range: bool | None = field(None, "7-bit weights; unset: the ISA decides (on for x86 without VNNI, off on VNNI and ARM)")
    weight_type: str = field("auto", "int8 weight type: auto (the ISA decides: s8), s8 or u8 (u8u8 with the u8 activations)",
                             choices=("auto", *int8.WEIGHT_TYPES))
    keep_float: list[str] = field(list(int8.FLOAT_KINDS), "static int8: node kinds kept float (layernorm, gelu, residual_add, softmax_input)")
    static_ops: list[str] = field(list(int8.STATIC_OPS), "static int8: op types quantized (others stay float); empty: ORT's whole QDQ set")
    int4_block_size: int = field(32, "int4: weights per quantization block (a power of two >= 16)", min=16)
    int4_accuracy_level: int = field(0, "int4: MatMulNBits accuracy_level (0: fp32 compute, 4: int8 activations)", choices=(0, 1, 2, 3, 4))
    isa: str = field("auto", "instruction set: auto (this CPU's), avx512_vnni, avx512, avx2, arm64", choices=("auto", *int8.ISAS))
    exclude: list[str] = field([], "model modules to keep fp32, e.g. encoder.layer.0.attention,classifier")
    accuracy_aware: bool = field(False, "keep the fewest sensitive modules fp32 to meet --tolerance")
    tolerance: float = field(0.5, "largest allowed validation accuracy loss, in points (accuracy-aware mode)", min=0, max=100)
    margin_z: float = field(1.0, "accuracy-aware: met when loss + margin_z * (paired standard error) <= tolerance, on the whole validation split (0: point estimate)", min=0)
    allow_unmet: bool = field(False, "accuracy-aware: write the model even when the tolerance cannot be met (recorded)")
    max_eval_rows: int = field(256, "validation rows for accuracy fp32 vs int8 (0: skip)", min=0)
    max_length: int | None = max_length_field()
    threads: int = field(0, "ONNX Runtime threads for the checks (0: ORT default)", min=0)


# The --help section of the options only a logit bundle (classifier, tagger, QA) reads: its parity check's
# rows and reference. A vector bundle refuses every option of this section and of the data section.
LOGIT_BUNDLE = "logit bundles (classifiers, taggers, QA)"


@dataclass
class BundleConfig(DataConfig):
    model: str = field("", "the model to bundle: an ONNX artifact (normally the int8 one from quantize) or a static "
                           "embedding student (its vector table)", group="model")
    output_dir: str = field("", "where the bundle directory is written", group="output")
    reference: str = field("", "optional fp32 ONNX or PyTorch artifact the bundle's labels are checked against "
                               "(a classifier's, tagger's or QA bundle)", group=LOGIT_BUNDLE)
    reference_agreement: float = field(0.9, "least share of the parity rows --reference decides (top two logits 0.01 or more apart) whose label the bundle must match", min=0, max=1, group=LOGIT_BUNDLE)
    parity_rows: int = field(64, "rows for the parity check", min=1, group=LOGIT_BUNDLE)
    tolerance: float = field(1e-4, "largest allowed |logit diff| between the bundle and its source model", min=0,
                             group=LOGIT_BUNDLE)
    allow_parity_failure: bool = field(False, "write the bundle even when parity fails (recorded)", group=LOGIT_BUNDLE)
    target: str = field("python", "python: predict.py with onnxruntime, tokenizers and numpy; web: also the folder "
                        "transformers.js loads as it is (config.json, tokenizer files, onnx/model_quantized.onnx, one "
                        "copy of the graph) and a static page, for every kind; "
                        "mobile: also mobile/model.ort and its required_operators.config for ONNX Runtime Mobile, its "
                        "outputs checked against the bundle's", choices=("python", "web", "mobile"))
    spin: str = field("auto", "the Predictor's default for ONNX Runtime's spinning threads: 'auto' times the bundle both "
                      "ways and keeps spinning unless off is clearly faster (two builds may differ); 'on'/'off' sets "
                      "it untimed", choices=SPIN_CHOICES)
    threads: str = field("auto", "the Predictor's default ONNX Runtime thread count: 'auto' times one thread against "
                         "ONNX Runtime's default (one per physical core) and keeps one only where clearly faster (two "
                         "builds may differ); 'default' or a number sets it untimed")
    max_length: int | None = max_length_field()
