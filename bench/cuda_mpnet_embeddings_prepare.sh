#!/usr/bin/env bash
# Packs .device/ for bench/cuda_mpnet_embeddings.sh (on a lent GPU):
#   - all-mpnet-base-v2 with its whole vocabulary (a general embedding student must keep every token)
#     and all-MiniLM-L6-v2 (the pretrained student), both in fp16 (loaded back as fp32 there), one tar
#     cut into five byte parts .device/emb-part{1..5}/ of about 53 MB, each carried by its own call
#   - the pinned transformers/tokenizers/hub/datasets/evaluate wheels (the device image has transformers 5)
#   - the built-in corpora (imdb, wordnet, sotu; gzip) as the kit's cache holds them, SNLI's validation
#     pairs and STS-B, so the device draws the very lines a CPU run with the same options draws
#   bash bench/cuda_mpnet_embeddings_prepare.sh     # then bench/cuda_mpnet_embeddings.sh's header says how
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
CACHE=${SHRINKBERT_CACHE:-$HOME/.cache/shrinkbert}
SHARED=${SHARED:-../shared/data}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
grep -qx '/.device/' .git/info/exclude 2>/dev/null || echo /.device/ >> .git/info/exclude
rm -rf .device && mkdir -p .device/whl .device/emb/mpnet16 .device/emb/minilm16 .device/data .device/cache/corpora
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .device/whl \
  $($PY -m pip freeze | grep -E '^(transformers|tokenizers|huggingface_hub|huggingface-hub|datasets|evaluate|dill|multiprocess)==')
for name in imdb wordnet sotu; do  # touches the kit's cache, so each is there before it is copied
  $PY -c "from shrinkbert.core.data.load import load_corpus; load_corpus('$name')" 2>/dev/null
  gzip -c "$CACHE"/corpora/$name-*.json > .device/cache/corpora/$(basename "$CACHE"/corpora/$name-*.json).gz
done
cp -r "$SHARED/stsb" .device/data/stsb
cp "$SHARED/snli/validation.csv" .device/data/snli-validation.csv
$PY - <<'PY'
import shutil
from pathlib import Path
from safetensors.torch import load_file, save_file
from shrinkbert.teachers.common import resolve_model_dir

for alias, folder in (("mpnet", "mpnet16"), ("minilm", "minilm16")):
    source, target = Path(resolve_model_dir(alias)), Path(".device/emb") / folder
    for item in source.iterdir():  # the sentence-transformers folder as it ships, weights apart
        if item.name != "model.safetensors" and not item.name.endswith((".bin", ".onnx", ".h5")) and item.name != "onnx":
            (shutil.copytree if item.is_dir() else shutil.copy2)(item, target / item.name)
    weights = load_file(str(source / "model.safetensors"))
    save_file({k: v.half().contiguous() for k, v in weights.items()}, str(target / "model.safetensors"),
              metadata={"format": "pt"})
    print(alias, sum(v.numel() for v in weights.values()) / 1e6, "M parameters")
PY
(cd .device/emb && sha256sum mpnet16/model.safetensors minilm16/model.safetensors > weights.sha256)
tar -C .device -cf /tmp/emb.tar emb
split -n 5 -d -a 1 /tmp/emb.tar /tmp/emb.part
for i in 0 1 2 3 4; do mkdir -p .device/emb-part$((i + 1)); mv /tmp/emb.part$i .device/emb-part$((i + 1))/; done
rm -rf /tmp/emb.tar .device/emb/mpnet16/model.safetensors .device/emb/minilm16/model.safetensors
du -sh .device/*
