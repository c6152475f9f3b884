#!/usr/bin/env bash
# Which lever lifts all-MiniLM-L6-v2, distilled into all-mpnet-base-v2's space, above what it scores as it
# ships? On a lent GPU, four students from one cached pass of the teacher over broad text (IMDB, WordNet,
# State of the Union, SNLI's validation sentences and STS-B's training sentences, up to 48,000 lines each; the stage's leak
# guard drops every line that repeats an STS-B validation or test sentence; Brown stays out: it is the
# report's drop-in index), trained side by side on the one GPU (each is host-bound alone). ROUND=1:
#   minilm       MSE + cosine to the teacher's vectors, lr 1e-4 (the plain embedding loss)
#   minilm-sim   the same plus the in-batch similarity-matrix MSE (--similarity-weight 10, relational KD)
#   minilm-slow  MSE + cosine at lr 3e-5: nearer MiniLM as it ships
#   slice        the 6-layer H384 slice of the teacher, lr 4e-4 (the recipe's other student, on the same text)
# ROUND=2: MiniLM with --similarity-weight 30, 100, 300 at lr 1e-4 (sim30, sim100, sim300) and 100 at 3e-4
# (sim100-fast). Each run keeps its epoch by STS-B validation plus agreement with the teacher on unseen
# lines (never a test split); then STS-B test Spearman of each on the GPU in fp32, and the students ranked
# by validation both ways: PICK=combined (the default: STS-B validation + 100 x agreement, the kit's epoch
# rule) or PICK=validation (STS-B validation alone). The first comes back in fp16 parts ($OUT/NAME.tar.N)
# for the int8 export, bundle and embedding report on a CPU; the others wait in /tmp/keep for a later call
# on the same machine (a call returns 8 files at most).
#
#   bash bench/cuda_mpnet_embeddings_prepare.sh      # here (once)
#   then, on one warm device machine, calls 1-5 carry .device/emb-partN and run
#       mkdir -p /tmp/emb && mv .device/emb-part*/* /tmp/emb/
#   and call 6 carries .device/whl .device/cache .device/data and runs
#       PARTS=/tmp/emb bash bench/cuda_mpnet_embeddings_levers.sh
#   (ROUND=2 in a call beside it: ROUND=2 PICK=validation PARTS=/tmp/emb ...)
#   and, for another student, a call that runs   cp /tmp/keep/NAME.tar.* $OUT/
#   QUICK=1 PARTS=.device bash bench/cuda_mpnet_embeddings_levers.sh   # here, on slices, to check the commands
set -uo pipefail
OUT=${OUT:-runs/cuda}
mkdir -p "$OUT"
exec > >(tee "$OUT/cuda-mpnet-levers.log") 2>&1
R=runs/cuda-levers
PARTS=${PARTS:-.device}
ROUND=${ROUND:-1} PICK=${PICK:-combined}
if [ "${QUICK:-0}" = 1 ]; then ROWS=600 EPOCHS=1 EVAL="--max-eval-rows 100" BATCH=32 WORKERS=0 LIMIT=900
else ROWS=${ROWS:-240000} EPOCHS=${EPOCHS:-3} EVAL="" BATCH=128 WORKERS=4 LIMIT=${LIMIT:-380}; fi
source bench/cuda_env.sh
unpack_embedding_models "$PARTS" || exit 1
trap 'rm -rf .device/emb' EXIT  # 264 MB that must not ride along on the next call
describe_machine
CORPUS="imdb,wordnet,sotu,.device/data/snli-validation.csv,.device/data/stsb/train.csv"
COMMON="--objective vectors --teacher .device/emb/mpnet16 --corpus $CORPUS --corpus-mix equal --max-train-rows $ROWS
  --task .device/data/stsb --batch-size $BATCH --mixed-precision bf16 --checkpoint-every 0 --num-workers $WORKERS $EVAL"
MINILM="--student .device/emb/minilm16"

# the teacher's vectors of the text and of the unseen lines, once: the students below read them from the cache
step teacher-vectors sb distill $COMMON $MINILM --max-steps 1 --output-dir $R/warm
rm -rf $R/warm
LOGS=/tmp/levers-logs  # outside $OUT: a call brings back 8 files at most
mkdir -p $LOGS /tmp/keep
pids=""
if [ "$ROUND" = 2 ]; then
  VARIANTS=("sim30|$MINILM --similarity-weight 30" "sim100|$MINILM --similarity-weight 100"
            "sim300|$MINILM --similarity-weight 300" "sim100-fast|$MINILM --similarity-weight 100 --learning-rate 3e-4")
else
  VARIANTS=("minilm|$MINILM --learning-rate 1e-4" "minilm-sim|$MINILM --learning-rate 1e-4 --similarity-weight 10"
            "minilm-slow|$MINILM --learning-rate 3e-5" "slice|--layers 6 --hidden 384 --learning-rate 4e-4")
fi
NAMES=$(for variant in "${VARIANTS[@]}"; do echo "${variant%%|*}"; done)
for variant in "${VARIANTS[@]}"; do
  name=${variant%%|*}
  (start=$SECONDS; timeout "$LIMIT" $PY -m shrinkbert distill $COMMON ${variant#*|} --epochs $EPOCHS --output-dir $R/$name \
     > "$LOGS/levers-$name.log" 2>&1; echo "== $name: rc $? in $((SECONDS - start)) s" >> "$LOGS/levers-$name.log") &
  pids="$pids $!"
done
wait $pids  # these four only: a bare `wait` would wait for the log's tee too, which never ends
for name in $NAMES; do
  echo "== $name"; grep -v "it/s\]$\|s/it\]$" "$LOGS/levers-$name.log" | grep -E "epoch|leak guard|==|error|Error" | tail -9
done

$PY - "$R" "${QUICK:-0}" "$NAMES" <<'PY'
import sys
from shrinkbert.core.scored_pairs import ScoredPairs, read_scored_pairs
from shrinkbert.core.kinds.embedder import Embedder
from shrinkbert.core.kinds.sts import sts_spearman
import torch

pairs = read_scored_pairs(".device/data/stsb/test.csv")
if sys.argv[2] == "1":
    pairs = ScoredPairs(pairs.first[:100], pairs.second[:100], pairs.scores[:100])
device = "cuda" if torch.cuda.is_available() else "cpu"
students = [(name, f"{sys.argv[1]}/{name}") for name in sys.argv[3].split()]
for name, path in [("teacher", ".device/emb/mpnet16"), ("minilm-as-it-ships", ".device/emb/minilm16"), *students]:
    try:
        model = Embedder.load(path).to(device)
    except Exception as error:  # a student whose stage failed or ran out of time: said, the others still measured
        print(f"STS-B test {name}: not measured ({type(error).__name__})")
        continue
    print(f"STS-B test {name}: {sts_spearman(model.encode, pairs):.2f} ({len(pairs.first)} pairs, fp32, {device})")
PY

dump_manifests "$R" "$OUT/manifests-mpnet-levers.json"
$PY - "$R" <<'PY'
import sys
from pathlib import Path
from safetensors.torch import load_file, save_file
for folder in Path(sys.argv[1]).iterdir():  # the students back in fp16, in parts under the 16 MiB a returned file may take
    if (folder / "model.safetensors").is_file():
        weights = load_file(str(folder / "model.safetensors"))
        save_file({k: v.half().contiguous() for k, v in weights.items()}, str(folder / "model.safetensors"),
                  metadata={"format": "pt"})
PY
# the students ranked by what each run kept its epoch by (students/embedding_distill.selection_score), and by
# STS-B validation alone; the first by PICK comes back
BEST=$($PY - "$R" "$PICK" <<'PY'
import json, sys
from pathlib import Path
from shrinkbert.students.embedding_distill import selection_score
found = {m.parent.name: json.loads(m.read_text())["metrics"] for m in Path(sys.argv[1]).glob("*/shrinkbert.json")}
found = {name: metrics for name, metrics in found.items() if "validation_spearman" in metrics}
rules = {"combined": selection_score, "validation": lambda metrics: metrics["validation_spearman"]}
for rule, score in rules.items():
    print(f"by {rule}: " + ", ".join(f"{name} {score(found[name]):.2f}" for name in sorted(found, key=lambda n: -score(found[n]))),
          file=sys.stderr)
print(max(found, key=lambda n: rules[sys.argv[2]](found[n])) if found else "")
PY
)
echo "first by $PICK: ${BEST:-none}"
for name in $NAMES; do
  [ -d $R/$name ] || continue
  if [ "$name" = "$BEST" ]; then where=$OUT; else where=/tmp/keep; fi
  tar -C $R -cf - $name | split -b 15M -d -a 1 - "$where/$name.tar."
done
ls -la "$OUT" /tmp/keep
