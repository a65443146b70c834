#!/usr/bin/env bash
# Install everything EditForge needs on a Debian/Ubuntu machine, into ./.venv:
#   bash scripts/setup.sh --torch cpu     # CPU build of torch 2.13.0 (laptops, CI)
#   bash scripts/setup.sh --torch cuda    # CUDA build of torch 2.13.0 (GPU machines)
# Options: --venv DIR (default .venv), --gpu (also the [gpu] extra: vllm, flash-attn),
#          --no-system (skip apt). Env: PYTHON (default python3), TORCH_INDEX_URL (where torch comes from).
# Steps: system packages with apt (when root or sudo can run it), the virtualenv, torch
# first and pinned, then `pip install -e ".[dev,ray,eval]"`. Running it again is a no-op.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

TORCH_VERSION=2.13.0
torch_kind="" venv=.venv gpu_extra=0 system=1
usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --torch) torch_kind=${2:-}; shift; [ $# -eq 0 ] || shift ;;
        --torch=*) torch_kind=${1#--torch=}; shift ;;
        --venv) [ $# -ge 2 ] || { echo "setup.sh: --venv needs a folder" >&2; exit 2; }; venv=$2; shift 2 ;;
        --gpu) gpu_extra=1; shift ;;
        --no-system) system=0; shift ;;
        -h | --help) usage; exit 0 ;;
        *) echo "setup.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$torch_kind" in
    cpu | cuda) ;;
    *) echo "setup.sh: choose the torch build explicitly: --torch cpu or --torch cuda" >&2; exit 2 ;;
esac

start=$SECONDS
step() { echo "== setup: $* ($((SECONDS - start)) s)"; }

# ---------------------------------------------------------------- system packages
# What each one is for: bubblewrap, the sandbox's strong backend; g++ with boost and OpenSSL
# headers, HumanEvalFix C++ (and DeepSpeed's CPU ops); node and javac, HumanEvalFix JS and
# Java; go with testify, and rustc and cargo (whichever are on PATH, rustup's too) with the rand,
# regex and md5 crates, HumanEvalFix Go and Rust; git, the data pipeline's git source; gcc and
# the Python headers, the sandbox's C module; JaCoCo (libjacoco-java) and npm (for c8), the
# audit's Java and JavaScript coverage; llvm-<rustc's LLVM version> (below), its Rust coverage.
# Tests that need a missing one skip.
PYTHON=${PYTHON:-python3}
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
[ -e /usr/include/boost/any.hpp ] || missing+=(libboost-dev)
[ -e /usr/include/openssl/md5.h ] || missing+=(libssl-dev)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless)
command -v go >/dev/null 2>&1 || missing+=(golang-go)
[ -d /usr/share/gocode/src/github.com/stretchr/testify/assert ] || missing+=(golang-github-stretchr-testify-dev)
command -v rustc >/dev/null 2>&1 || missing+=(rustc)
command -v cargo >/dev/null 2>&1 || missing+=(cargo)
for crate in rand-0.8 regex-1 md5-0.7; do  # the crates bigcode's Rust harness declares, for cargo offline
    compgen -G "/usr/share/cargo/registry/$crate.*" >/dev/null || missing+=("librust-${crate%-*}-dev")
done
command -v git >/dev/null 2>&1 || missing+=(git)
# the sandbox compiles its system-call module (core/sandbox/_editforge_sys.c) with the interpreter's headers
command -v cc >/dev/null 2>&1 || missing+=(gcc)
"${PYTHON}" -c "import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" 2>/dev/null \
    || missing+=(python3-dev)
[ -e /usr/share/java/org.jacoco.core.jar ] || missing+=(libjacoco-java)
command -v npm >/dev/null 2>&1 || command -v c8 >/dev/null 2>&1 || missing+=(npm)
if [ ! -x "$venv/bin/python" ] && ! "$PYTHON" -c "import ensurepip, venv" >/dev/null 2>&1; then
    missing+=(python3-venv)
fi
if [ ${#missing[@]} -eq 0 ]; then
    step "system packages: all present"
elif [ "$system" = 0 ]; then
    step "system packages: skipped (--no-system); missing: ${missing[*]}"
else
    sudo=""
    [ "$(id -u)" = 0 ] || { sudo -n true 2>/dev/null && sudo="sudo -n"; }
    if ! command -v apt-get >/dev/null 2>&1; then
        step "system packages: skipped, no apt-get here; install yourself: ${missing[*]}"
    elif [ "$(id -u)" != 0 ] && [ -z "$sudo" ]; then
        step "system packages: skipped, not root and no sudo; install yourself: ${missing[*]}"
    else
        step "system packages: apt-get install ${missing[*]}"
        if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
            --no-install-recommends "${missing[@]}"; } >/tmp/editforge-apt.log 2>&1; then
            echo "warning: apt-get could not install ${missing[*]} (log: /tmp/editforge-apt.log); going on" >&2
        fi
    fi
fi

# The audit's Rust coverage reads -C instrument-coverage's profiles with the llvm-profdata and
# llvm-cov of rustc's own LLVM version (known once rustc is there); a rustc built without the
# profiler runtime (Debian's) cannot instrument, so it gets none.
llvm=$(rustc -vV 2>/dev/null | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
if [ -z "$llvm" ]; then
    step "llvm for Rust coverage: skipped (no rustc)"
elif ! compgen -G "$(rustc --print sysroot)/lib/rustlib/*/lib/libprofiler_builtins-*.rlib" >/dev/null; then
    step "llvm for Rust coverage: skipped (this rustc has no profiler runtime; the audit says so)"
elif command -v "llvm-profdata-$llvm" >/dev/null 2>&1 || [ -x "/usr/lib/llvm-$llvm/bin/llvm-profdata" ]; then
    step "llvm for Rust coverage: present (LLVM $llvm)"
elif [ "$system" != 0 ] && { [ "$(id -u)" = 0 ] || [ -n "${sudo:-}" ]; } && apt-cache show "llvm-$llvm" >/dev/null 2>&1; then
    step "llvm for Rust coverage: apt-get install llvm-$llvm"
    DEBIAN_FRONTEND=noninteractive ${sudo:-} apt-get install -y -qq --no-install-recommends "llvm-$llvm" >>/tmp/editforge-apt.log 2>&1 \
        || echo "warning: apt-get could not install llvm-$llvm (log: /tmp/editforge-apt.log); the audit reports Rust coverage as unavailable" >&2
else
    step "llvm for Rust coverage: skipped (no llvm-$llvm package, or not root); the audit reports Rust coverage as unavailable"
fi

# c8 (the audit's JavaScript coverage) comes from the npm registry.
if command -v c8 >/dev/null 2>&1; then
    step "c8: present"
elif [ "$system" != 0 ] && command -v npm >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || [ -n "${sudo:-}" ]; }; then
    step "c8: npm install -g c8"
    ${sudo:-} npm install -g -q c8 >/tmp/editforge-npm.log 2>&1 \
        || echo "warning: npm could not install c8 (log: /tmp/editforge-npm.log); JavaScript coverage is skipped" >&2
else
    step "c8: skipped (no npm, or not root); the audit reports JavaScript coverage as unavailable"
fi

# ---------------------------------------------------------------- virtualenv
if [ -x "$venv/bin/python" ]; then
    step "virtualenv: reusing $venv"
else
    "$PYTHON" -c 'import sys; assert sys.version_info >= (3, 10), sys.version' 2>/dev/null \
        || { echo "setup.sh: $PYTHON is older than 3.10; set PYTHON=python3.11 (or newer)" >&2; exit 2; }
    step "virtualenv: $PYTHON -m venv $venv"
    "$PYTHON" -m venv "$venv"
fi
. "$venv/bin/activate"

# ---------------------------------------------------------------- torch, explicitly
# Installed first and pinned: left to the project's `torch>=2.4`, pip pulls a multi-GB CUDA
# build on Linux. The CPU build comes from PyTorch's CPU index when it answers, else from
# pip's own configuration (a local wheel, a mirror); TORCH_INDEX_URL overrides both.
index=()
if [ -n "${TORCH_INDEX_URL:-}" ]; then
    index=(--index-url "$TORCH_INDEX_URL")
elif [ "$torch_kind" = cpu ] && python -c 'import urllib.request as u
u.urlopen("https://download.pytorch.org/whl/cpu/torch/", timeout=5)' >/dev/null 2>&1; then
    index=(--index-url https://download.pytorch.org/whl/cpu)
fi
step "torch $TORCH_VERSION ($torch_kind build)${index[*]:+ from ${index[1]}}"
if [ "$torch_kind" = cpu ]; then
    pip install --quiet torch==2.13.0 "${index[@]}"
else
    pip install --quiet "torch==$TORCH_VERSION" "${index[@]}"
fi
python -W ignore::UserWarning - "$torch_kind" <<'EOF'  # numpy arrives with editforge
import sys

import torch

want, cuda = sys.argv[1], torch.version.cuda
if (want == "cpu") != (cuda is None):
    sys.exit(
        f"setup.sh: asked for the {want} build of torch, got {torch.__version__} (CUDA {cuda}); "
        "set TORCH_INDEX_URL to the PyTorch index of the build you want and run setup.sh again"
    )
EOF

# ---------------------------------------------------------------- editforge
extras=dev,ray,eval
[ "$gpu_extra" = 1 ] && extras=$extras,gpu
step "editforge: pip install -e \".[$extras]\""
pip install --quiet -e ".[$extras]"
python -c "import train, data_pipeline, eval, torch; print('editforge ready: torch', torch.__version__)"
step "done in $((SECONDS - start)) s; the tests: $venv/bin/python -m pytest -q"
