#!/usr/bin/env bash
# Packs .device/ for bench/cuda.sh: what a GPU machine with no registry access needs beyond its own
# torch, in under the 64 MiB a call may carry.
#   - the pinned transformers/tokenizers/hub/datasets/evaluate as wheels (its image has transformers 5)
#   - MiniLM's full tokenizer (BERT-base from scratch uses its 30,522-token vocabulary)
#   - MiniLM with its vocabulary trimmed to movie-snippets (13,508 tokens) and its weights in fp16:
#     90.9 MB in fp32 does not fit; loaded back as fp32 there, so the teacher differs from the CPU
#     runs' by fp16 rounding of its weights
#   - 3.9 MB of IMDB review sentences joined into ~110-word lines (MLM examples that fill 128 tokens)
#   - movie-snippets' stored split
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
CACHE=${SHRINKBERT_CACHE:-$HOME/.cache/shrinkbert}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
grep -qx '/.device/' .git/info/exclude 2>/dev/null || echo /.device/ >> .git/info/exclude
rm -rf .device runs/device/minilm-trim
mkdir -p .device/whl .device/tok .device/minilm16 .device/cache/tasks
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .device/whl \
  $($PY -m pip freeze | grep -E '^(transformers|tokenizers|huggingface_hub|huggingface-hub|datasets|evaluate|dill|multiprocess)==')
MINILM=$($PY -c "from shrinkbert.teachers.common import resolve_model_dir; print(resolve_model_dir('minilm'))")
cp "$MINILM"/{tokenizer.json,tokenizer_config.json,vocab.txt,special_tokens_map.json,config.json} .device/tok/
$PY -m shrinkbert trim-vocab --model "$MINILM" --task movie-snippets --output-dir runs/device/minilm-trim
cp runs/device/minilm-trim/{config.json,tokenizer.json,tokenizer_config.json,vocab.txt,special_tokens_map.json} .device/minilm16/
cp -r "$CACHE"/tasks/movie-snippets-*-seed0 .device/cache/tasks/
find .device/cache/tasks -name 'cache-*.arrow' -delete  # datasets' map caches of earlier runs: megabytes, rebuilt there
$PY - "$CACHE" <<'PY'
import json, sys
from pathlib import Path
from safetensors.torch import load_file, save_file

weights = load_file("runs/device/minilm-trim/model.safetensors")
save_file({k: v.half().contiguous() for k, v in weights.items() if not k.startswith("classifier.")},
          ".device/minilm16/model.safetensors", metadata={"format": "pt"})
from shrinkbert.core.data.load import load_corpus
sentences = load_corpus(["imdb"], cache_dir=sys.argv[1])
lines, current, size = [], [], 0
for sentence in sentences:
    current.append(sentence.strip())
    if sum(len(c.split()) for c in current) >= 110:
        lines.append(" ".join(current))
        size += len(lines[-1])
        current = []
        if size > 4_000_000:
            break
Path(".device/imdb-paragraphs.txt").write_text("\n".join(lines) + "\n")
print(f"{len(lines):,} lines of IMDB text")
PY
du -sh .device
