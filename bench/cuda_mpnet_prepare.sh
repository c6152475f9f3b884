#!/usr/bin/env bash
# Packs the MPNet teacher for bench/cuda_mpnet.sh. all-mpnet-base-v2 is 438 MB in fp32 and a device
# call carries 64 MiB, so it travels in parts over consecutive calls to one warm machine:
#   - its vocabulary trimmed to movie-snippets (30,527 -> 13,900-odd tokens; the same text splits the
#     same), its weights in fp16 (193 MB; loaded back as fp32 there, so the teacher differs from the CPU
#     runs' by fp16 rounding of its weights), cut into five byte parts .device/mpnet-part{1..5}/
#   - IMDB review sentences for the transfer set (the mpnet-movies recipe's `transfer_corpus: imdb`)
#   - PRETRAINED=1: the demo's (DEMO=runs/demo) edge student (already trimmed) and wide student (trimmed
#     here), in fp16, beside parts 1 and 2 (each call carries one part and at most 64 MiB in all)
# Run bench/cuda_prepare.sh first (the pinned wheels, the stored movie-snippets split).
#   bash bench/cuda_mpnet_prepare.sh          # then bench/cuda_mpnet.sh's header says how to send it
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
CACHE=${SHRINKBERT_CACHE:-$HOME/.cache/shrinkbert}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
[ -d .device/whl ] || { echo "error: run bench/cuda_prepare.sh first (.device/whl)"; exit 2; }
rm -rf .device/mpnet16 .device/mpnet-part* runs/device/mpnet-trim
MPNET=$($PY -c "from shrinkbert.teachers.common import resolve_model_dir; print(resolve_model_dir('mpnet'))")
$PY -m shrinkbert trim-vocab --model "$MPNET" --task movie-snippets --output-dir runs/device/mpnet-trim
mkdir -p .device/mpnet16
cp runs/device/mpnet-trim/{config.json,tokenizer.json,tokenizer_config.json,vocab.txt,special_tokens_map.json} .device/mpnet16/
$PY - "$CACHE" <<'PY'
import sys
from pathlib import Path
from safetensors.torch import load_file, save_file

weights = load_file("runs/device/mpnet-trim/model.safetensors")
# trim-vocab loads the encoder as a classifier; its head is random, so it stays behind (finetune makes one)
save_file({k: v.half().contiguous() for k, v in weights.items() if not k.startswith("classifier.")},
          "/tmp/mpnet16.safetensors", metadata={"format": "pt"})
from shrinkbert.core.data.load import load_corpus
sentences = [s.strip() for s in load_corpus(["imdb"], cache_dir=sys.argv[1]) if s.strip()]
Path(".device/imdb-sentences.txt").write_text("\n".join(sentences[:20000]) + "\n")
print(f"{min(len(sentences), 20000):,} IMDB sentences")
PY
sha256sum /tmp/mpnet16.safetensors | cut -d' ' -f1 > .device/mpnet16/model.safetensors.sha256
split -n 5 -d -a 1 /tmp/mpnet16.safetensors /tmp/mpnet16.part
for i in 0 1 2 3 4; do mkdir -p .device/mpnet-part$((i + 1)); mv /tmp/mpnet16.part$i .device/mpnet-part$((i + 1))/; done
rm /tmp/mpnet16.safetensors
if [ "${PRETRAINED:-0}" = 1 ]; then
  DEMO=${DEMO:-runs/demo}
  rm -rf runs/device/wide-trim
  $PY -m shrinkbert trim-vocab --model "$DEMO/student-wide" --output-dir runs/device/wide-trim
  for pair in "$DEMO/edge-trimmed .device/mpnet-part1/edge16" "runs/device/wide-trim .device/mpnet-part2/wide16"; do
    set -- $pair
    mkdir -p "$2"
    # no manifest: its recorded hashes are of the fp32 files
    cp "$1"/{config.json,tokenizer.json,tokenizer_config.json,vocab.txt,special_tokens_map.json} "$2"/
    $PY -c "import sys; from safetensors.torch import load_file, save_file
save_file({k: v.half().contiguous() for k, v in load_file(sys.argv[1]).items()}, sys.argv[2], metadata={'format': 'pt'})" \
      "$1/model.safetensors" "$2/model.safetensors"
  done
fi
du -sh .device/mpnet-part* .device/mpnet16 .device/imdb-sentences.txt
