"""Measure every variant on the same rows: accuracy, latency, size; the report.

    shrinkbert eval ART [ART ...] --task TASK [--out runs/eval] [--baseline ART] [--quick]

Modules, one job each:
    runners   one uniform runner per artifact kind (PyTorch dir, ONNX dir, edge bundle)
    rows      the stored test rows every variant is measured on
    latency   cases (batch x sequence length), interleaved round-robin timing in bursts
    workers   the timing processes, one per variant, started and driven from the harness
    worker    one such process: only the variant's runtime (an ONNX one never imports torch)
    memprobe  memory of one variant alone in a fresh process (where it is not timed in a worker)
    memory    peak RSS growth while a variant loads (psutil)
    cache     finished measurements keyed by artifact hash + settings, written atomically
    lineage   the parent chain and recorded flags from shrinkbert.json
    measure   load + accuracy + latency for a list of artifacts, one error line per bad one
    report    report.json, report.md, summary.csv, latency.csv
    stats     paired bootstrap intervals and McNemar's test of two variants on the same rows
    plot      pareto.png: accuracy vs p50 latency, marker area = file size, frontier drawn
    harness   the stage and its command line (main(argv) -> int)
"""
