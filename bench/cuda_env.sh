# Sourced by bench/cuda.sh, bench/cuda_mpnet.sh and bench/cuda_mpnet_embeddings*.sh: the pinned wheels
# installed from .device/whl (the device image has transformers 5), the offline environment, what the
# machine is, `step`/`sb`, and the embedding models' unpacking.
PY=${PY:-python3}
if [ -d .device/whl ] && [ "${INSTALL:-1}" = 1 ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .device/whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || exit 1
fi
export SHRINKBERT_CACHE=$PWD/.device/cache HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1

describe_machine() {
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>/dev/null
  $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'cuda', torch.cuda.is_available() and torch.cuda.get_device_name(0))"
  lscpu | grep -E "Model name|^CPU\(s\)" || true
}

step() {  # name, then the command: times it, keeps going when it fails (each later step says what it needs)
  local name=$1; shift
  echo "== $name: $*"
  local start=$SECONDS
  "$@" 2>&1 | grep -v "it/s\]$\|s/it\]$" | tail -12
  echo "== $name: rc ${PIPESTATUS[0]} in $((SECONDS - start)) s"
}
sb() { $PY -m shrinkbert "$@"; }
mlm() {  # the pretrain stage from scratch on .device's tokenizer and IMDB text at 128 tokens, no checkpoints;
  # the preset, batch, steps, precision and the rest come after
  sb pretrain --tokenizer .device/tok --corpus .device/imdb-paragraphs.txt --max-length 128 --epochs 1000 \
    --checkpoint-every 0 "$@"
}

unpack_embedding_models() {  # parts folder: bench/cuda_mpnet_embeddings_prepare.sh's two models joined into
  # .device/emb and checked against the hashes taken before the cut; the built-in corpora unzipped
  find "$1" -name 'emb.part*' | sort | xargs cat | tar -C .device -xf - || return 1
  (cd .device/emb && sha256sum -c weights.sha256) || return 1
  for gz in .device/cache/corpora/*.gz; do [ -f "${gz%.gz}" ] || gunzip -k "$gz"; done
}

dump_manifests() {  # runs folder, output JSON: each run's metrics, config and environment, and a line each
  $PY - "$1" "$2" <<'PY'
import json, sys
from pathlib import Path
runs = {p.parent.name: json.loads(p.read_text()) for p in sorted(Path(sys.argv[1]).glob("*/shrinkbert.json"))}
keep = {name: {"metrics": m.get("metrics"), "config": m.get("config"), "environment": m.get("environment")} for name, m in runs.items()}
Path(sys.argv[2]).write_text(json.dumps(keep, indent=1, default=str))
for name, m in keep.items():
    metrics = m["metrics"] or {}
    print(name, {k: v for k, v in metrics.items() if not isinstance(v, (list, dict))})
PY
}
