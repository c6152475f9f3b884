#!/usr/bin/env bash
# all-mpnet-base-v2's embedding students on a lent GPU: the teacher's
# vectors of broad text (IMDB sentences, WordNet glosses, State of the Union paragraphs, SNLI's validation
# sentences: an equal share each) computed once on the GPU, then two 6-layer H384 students distilled on
# them through `shrinkbert distill --objective vectors`, each epoch kept by STS-B validation plus agreement
# with the teacher on unseen lines (never a test split):
#   - slice:  sliced from the teacher (the recipe's student, recipes/mpnet-embeddings.yaml);
#   - minilm: all-MiniLM-L6-v2 as the starting point (same WordPiece pieces, re-indexed to MPNet's ids,
#             students/vocab_map.py) with a 384 -> 768 projection fitted by least squares.
# Then STS-B test Spearman of the teacher and both students, on the GPU in fp32; the minilm student's
# weights come back in fp16 parts ($OUT/student-minilm.tar.N), the slice student's wait in /tmp/keep.
#
#   bash bench/cuda_mpnet_embeddings_prepare.sh      # here
#   then calls to one warm device machine, each within its idle window: calls 1-5 carry .device/emb-partN
#   and run   mkdir -p /tmp/emb && mv .device/emb-part*/* /tmp/emb/
#   call 6 carries .device/whl .device/cache .device/data and runs
#       PARTS=/tmp/emb bash bench/cuda_mpnet_embeddings.sh
#   and a last one, if wanted:  cp /tmp/keep/* $OUT/    (the slice student's parts)
#   QUICK=1 PARTS=.device bash bench/cuda_mpnet_embeddings.sh   # here, on slices, to check the commands
set -uo pipefail
OUT=${OUT:-runs/cuda}
mkdir -p "$OUT"
exec > >(tee "$OUT/cuda-mpnet-embeddings.log") 2>&1
R=runs/cuda-emb
PARTS=${PARTS:-.device}
if [ "${QUICK:-0}" = 1 ]; then ROWS=600 EPOCHS=1 EVAL="--max-eval-rows 100" BATCH=32
else ROWS=${ROWS:-200000} EPOCHS=${EPOCHS:-5} EVAL="" BATCH=128; fi
source bench/cuda_env.sh
unpack_embedding_models "$PARTS" || exit 1
trap 'rm -rf .device/emb' EXIT  # 264 MB that must not ride along on the next call
describe_machine
CORPUS="imdb,wordnet,sotu,.device/data/snli-validation.csv"
COMMON="--objective vectors --teacher .device/emb/mpnet16 --corpus $CORPUS --corpus-mix equal --max-train-rows $ROWS
  --task .device/data/stsb --epochs $EPOCHS --batch-size $BATCH --mixed-precision bf16 --checkpoint-every 0 $EVAL"

step student-minilm sb distill $COMMON --student .device/emb/minilm16 --learning-rate 1e-4 --output-dir $R/minilm
step student-slice sb distill $COMMON --layers 6 --hidden 384 --learning-rate 4e-4 --output-dir $R/slice

$PY - "$R" "${QUICK:-0}" <<'PY'
import sys
from shrinkbert.core.scored_pairs import ScoredPairs, read_scored_pairs
from shrinkbert.core.kinds.embedder import Embedder
from shrinkbert.core.kinds.sts import sts_spearman
import torch

pairs = read_scored_pairs(".device/data/stsb/test.csv")
if sys.argv[2] == "1":
    pairs = ScoredPairs(pairs.first[:100], pairs.second[:100], pairs.scores[:100])
device = "cuda" if torch.cuda.is_available() else "cpu"
for name, path in (("teacher", ".device/emb/mpnet16"), ("minilm-as-it-ships", ".device/emb/minilm16"),
                   ("student-minilm", f"{sys.argv[1]}/minilm"), ("student-slice", f"{sys.argv[1]}/slice")):
    try:
        model = Embedder.load(path).to(device)
    except Exception as error:  # a student whose stage failed: said, and the others still measured
        print(f"STS-B test {name}: not measured ({error})")
        continue
    print(f"STS-B test {name}: {sts_spearman(model.encode, pairs):.2f} ({len(pairs.first)} pairs, fp32, {device})")
PY

dump_manifests "$R" "$OUT/manifests-mpnet-embeddings.json"
# the students back in fp16, in parts under the 16 MiB a returned file may take
$PY - "$R" <<'PY'
import sys
from pathlib import Path
from safetensors.torch import load_file, save_file
for name in ("minilm", "slice"):
    folder = Path(sys.argv[1]) / name
    if (folder / "model.safetensors").is_file():
        weights = load_file(str(folder / "model.safetensors"))
        save_file({k: v.half().contiguous() for k, v in weights.items()}, str(folder / "model.safetensors"),
                  metadata={"format": "pt"})
PY
mkdir -p /tmp/keep
[ -d $R/minilm ] && tar -C $R -cf - minilm | split -b 15M -d -a 1 - "$OUT/student-minilm.tar."
[ -d $R/slice ] && tar -C $R -cf - slice | split -b 15M -d -a 1 - /tmp/keep/student-slice.tar.
ls -la "$OUT" /tmp/keep
