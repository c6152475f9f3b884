"""Measure every variant on the same rows: accuracy, latency, size; the report."""
