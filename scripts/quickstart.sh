#!/usr/bin/env bash
# The whole path on one CPU machine: mine this repository's history, filter and dedup it,
# train the tiny recipe, evaluate on the fixtures and a HumanEvalFix sample, print the table.
#   bash scripts/quickstart.sh                     # a minute or two on 2 cores
#   QUICKSTART_FAST=1 bash scripts/quickstart.sh   # the shortened run CI exercises
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${QUICKSTART_DIR:-$repo/runs/quickstart}
cd "$repo"
export WANDB_MODE=${WANDB_MODE:-offline} WANDB_SILENT=true TOKENIZERS_PARALLELISM=false

humanevalpack=$repo/../shared/data/humanevalpack
benchmarks="eval/benchmarks/fixtures.jsonl"
[ -d "$humanevalpack" ] && benchmarks="$benchmarks,$humanevalpack/python.jsonl"

if [ "${QUICKSTART_FAST:-0}" = 1 ]; then
    epochs=1; synthetic=200; n=1; max_new=48; hef_limit=8
else
    epochs=3; synthetic=600; n=4; max_new=192; hef_limit=40
fi

echo "== 1/4 Mine this repository's git history, filter, dedup, decontaminate"
python -m data_pipeline.build pipeline=commits2023ft source=git "source.repos=[$repo]" \
    "out=$work/data" "pipeline.decontaminate.benchmarks=[$benchmarks]" plots=false

echo "== 2/4 Train recipe=tiny on the mined edits plus synthetic ones (2 processes)"
torchrun --nproc_per_node 2 train/sft.py recipe=tiny "run.output_dir=$work/model" \
    "data.datasets=[{path: $work/data},{synthetic: $synthetic}]" "recipe.epochs=$epochs" run.report_to=none

echo "== 3/4 Evaluate on the fixtures (hf backend)"
python -m eval.run benchmark=fixtures "model.path=$work/model/final" model.name=tiny backend=hf \
    "gen.n=$n" "gen.max_new_tokens=$max_new" "out=$work/eval-fixtures"

echo "== 4/4 Evaluate on a HumanEvalFix sample"
if [ -d "$humanevalpack" ]; then hef_path="benchmark.path=$humanevalpack"; else hef_path="benchmark.path=null"; fi
python -m eval.run benchmark=humanevalfix "$hef_path" "benchmark.limit=$hef_limit" \
    "model.path=$work/model/final" model.name=tiny backend=hf "gen.n=$n" "gen.max_new_tokens=$max_new" \
    "out=$work/eval-humanevalfix"

echo
echo "== Results (a tiny model scores about 0; the pipeline is real)"
for d in "$work/eval-fixtures" "$work/eval-humanevalfix"; do
    sed -n '1,5p' "$d/report.md"
    echo
done
