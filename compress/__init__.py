"""Shrink a trained model: pruning, vocabulary trimming, ONNX export, int8, edge bundle."""
