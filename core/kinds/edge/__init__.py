"""Torch-free postprocessing that edge bundles ship beside predict.py, one file per task kind.

Each file here is copied into a bundle by compress/bundle.py and loaded by the bundle's
Predictor (compress/edge_predictor.py) by labels.json's "kind_module". They import numpy,
tokenizers and the standard library only, and nothing of shrinkbert: a bundle runs alone.

The functions a kind's file defines (p is the Predictor: p.labels, p.tokenizer, p.encode,
p.run, p.probabilities):

    logits(p, texts, pairs)                 the rows the kit compares (parity) for texts
    rows_logits(p, rows, batch_size)        the same for the kit's rows (dicts of the kind's columns)
    predict(p, texts, pairs, batch_size)    the bundle's answer per text (JSON-able dicts)
    word_logits(p, word_lists)              (tagging) logits of pre-split words; others raise
    predict_words(p, word_lists, batch_size)
    read_lines(handle)                      (texts, pairs or None) from a file of inputs
    print_results(p, texts, pairs, as_json, error)   the command line's output
"""
