#!/usr/bin/env bash
# The checks that need a CUDA GPU, in one command that fits a few minutes of one GPU
# (docs/performance.md, "Checking a GPU node"):
#   1. the machine and the packages that will run (versions.log);
#   2. scripts/bench_train.py: the recipe as shipped (`default`) against length-grouped padded
#      batches, interleaved --rounds times (bench_train.log, bench_train.json; its RESULT line has
#      tokens/s, MFU and the ratio to padded);
#   3. tests/test_gpu.py (test_gpu.log, test_gpu.xml).
# Every step runs even where one before it failed; the exit status is the first failure's.
# A node without a package index: --wheels DIR installs DIR's wheels (scripts/offline_wheels.py)
# into a folder of their own, first on PYTHONPATH, so they shadow the node's own versions.
#
#   scripts/gpu_checks.sh [--wheels DIR] [--out DIR] [--rounds N] [--device cuda|cpu]
#                         [--bench-minutes M] [--test-minutes M] [-- more bench_train.py arguments]
# PYTHON (default python3) is the interpreter; --device cpu runs the same steps on the tiny recipe.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python3}"
WHEELS="" OUT="gpu-checks" ROUNDS=2 DEVICE=cuda BENCH_MIN=5 TEST_MIN=3 EXTRA=()
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --wheels) WHEELS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --device) DEVICE="$2"; shift 2 ;;
    --bench-minutes) BENCH_MIN="$2"; shift 2 ;;
    --test-minutes) TEST_MIN="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$DEVICE" in cuda|cpu) ;; *) echo "error: --device takes cuda or cpu, not $DEVICE" >&2; exit 2 ;; esac
for pair in "rounds=$ROUNDS" "bench-minutes=$BENCH_MIN" "test-minutes=$TEST_MIN"; do
  [[ "${pair#*=}" =~ ^[1-9][0-9]*$ ]] || { echo "error: --${pair%%=*} takes a whole number above 0, not ${pair#*=}" >&2; exit 2; }
done
mkdir -p "$OUT" && OUT="$(cd "$OUT" && pwd)" || { echo "error: cannot make the folder $OUT" >&2; exit 2; }
cd "$ROOT" || exit 2

export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}" WANDB_MODE="${WANDB_MODE:-disabled}" TOKENIZERS_PARALLELISM=false
if [ -n "$WHEELS" ]; then
  shopt -s nullglob; wheels=("$WHEELS"/*.whl); shopt -u nullglob
  [ ${#wheels[@]} -gt 0 ] || { echo "error: no wheels in $WHEELS (scripts/offline_wheels.py makes them)" >&2; exit 2; }
  SITE="$(mktemp -d "${TMPDIR:-/tmp}/gpu-checks-site.XXXXXX")"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "${wheels[@]}" \
    || { echo "error: installing the wheels of $WHEELS failed" >&2; exit 2; }
  export PYTHONPATH="$SITE:$PYTHONPATH"
  echo "installed ${#wheels[@]} wheels from $WHEELS into $SITE"
fi

status=0
step() {  # step NAME MINUTES COMMAND...: its output on the console and in OUT/NAME.log
  local name="$1" minutes="$2"; shift 2
  echo "== $name (at most $minutes min)"
  local start=$SECONDS
  timeout --kill-after=20 "$((minutes * 60))" "$@" 2>&1 | tee "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 124 ] && echo "$name: stopped after $minutes min"
  echo "== $name: exit $rc in $((SECONDS - start)) s"
  [ "$status" -ne 0 ] || status=$rc
}

step versions 1 "$PY" - <<'EOF'
import importlib.metadata as md, platform, subprocess
import torch
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda)
if torch.cuda.is_available():
    print("device", torch.cuda.get_device_name(), f"{torch.cuda.get_device_properties(0).total_memory / 2**30:.0f} GiB")
    smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,power.limit,clocks.max.sm",
                          "--format=csv,noheader"], capture_output=True, text=True)
    print("driver, power limit, max SM clock:", smi.stdout.strip() or smi.stderr.strip())
for name in ("transformers", "trl", "datasets", "accelerate", "peft", "hydra-core", "liger-kernel",
             "flash-attn", "deepspeed", "triton"):
    try:
        print(name, md.version(name))
    except md.PackageNotFoundError:
        print(name, "not installed")
EOF

step bench_train "$BENCH_MIN" "$PY" scripts/bench_train.py --device "$DEVICE" --configs padded,default \
  --rounds "$ROUNDS" --json "$OUT/bench_train.json" "${EXTRA[@]}"

GPU_TESTS=(tests/test_gpu.py)
[ "$DEVICE" = cuda ] || GPU_TESTS+=(-rs)  # without CUDA they skip: say why
step test_gpu "$TEST_MIN" "$PY" -m pytest -q -p no:cacheprovider "${GPU_TESTS[@]}" --junitxml "$OUT/test_gpu.xml"

echo "results in $OUT:"
grep -h "^RESULT" "$OUT/bench_train.log" || echo "bench_train printed no RESULT line"
tail -n 1 "$OUT/test_gpu.log"
exit "$status"
