"""Shrink a trained model: pruning, vocabulary trimming, ONNX export, int8, edge bundle.

Stages (each `python -m shrinkbert.compress.<stage> --config file.yaml` or flags; `run(Config) -> Path`):
  prune       structured: remove attention heads and FFN neurons (Taylor / Michel et al. importance)
  sparsify    unstructured magnitude pruning, baked in (smaller gzip, not faster)
  trim_vocab  keep only the tokens a corpus uses: embeddings + tokenizer, ids remapped together
  export      ONNX through Optimum, dynamic axes, parity-checked against PyTorch; optional O1/O2
  quantize    int8 through ORTQuantizer: dynamic/static, per-channel, ISA; accuracy-aware fp32 fallback
  bundle      edge bundle: int8 ONNX + tokenizer.json + predict.py needing only onnxruntime/tokenizers/numpy
Helpers: common (rows, runtimes, parity), importance, int8, onnx_modules, accuracy_aware, edge_predictor.
This room imports core/ only; other rooms' work arrives as artifacts on disk.
"""
