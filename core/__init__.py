"""Plumbing every room uses: config, tasks and datasets, the training loop, artifacts, errors."""
