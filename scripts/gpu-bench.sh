#!/usr/bin/env bash
# GPU benchmarks of the Moshi model loop (models/examples/moshi_bench.rs), of Kyutai STT's
# batched transcriber (models/examples/stt_bench.rs) and of the cascade's embedded LLM
# (models/examples/llm_bench.rs, SmolLM2-135M's shape with random weights), built here and run
# on a GPU machine.
# See docs/benchmarks.md.
#
#   scripts/gpu-bench.sh build   on a machine with Rust and no GPU: fetch NVIDIA's CUDA 13.0
#                                compiler from PyPI into .cuda/toolkit, make link stubs for the
#                                driver and CUDA libraries, build `moshi_bench`, `stt_bench`, `llm_bench`
#                                with `--features cuda` in target/cuda, strip and xz them into
#                                .gpu-bench/
#   scripts/gpu-bench.sh run [moshi_bench args]
#                                on a GPU machine (no Rust needed): unpack .gpu-bench/, find the
#                                driver's and the pip `nvidia-*` CUDA libraries, run the tiny
#                                sanity check, the full-size Moshiko benchmark (extra args are
#                                appended to it) and the full-size Kyutai STT 1B benchmark
#                                (random weights) and the embedded LLM (random weights, SmolLM2-135M's
#                                shape), log to ${OUT:-.gpu-bench}
#   scripts/gpu-bench.sh         `run` where a GPU is visible (building first if there is no
#                                binary and cargo exists), else `build`
#
# Environment: CUDA_COMPUTE_CAP (default: the visible GPU's, else 90 = H100/H200),
# GPU_BENCH_SECONDS (time budget of `run`, default 530), GPU_BENCH_NICE (default 10).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

CUDA_PKGS=(
    nvidia-cuda-nvcc==13.0.88
    nvidia-nvvm==13.0.88
    nvidia-cuda-crt==13.0.88
    nvidia-cuda-runtime==13.0.96
    nvidia-cuda-cccl==13.0.85
)
TOOLKIT="$ROOT/.cuda/toolkit"
CUDA="$TOOLKIT/nvidia/cu13" # the wheels' layout: bin/nvcc, include/, lib/, nvvm/
ART="$ROOT/.gpu-bench"
CUDA_TARGET="$ROOT/target/cuda"
BIN_NAME=moshi_bench
BINS=(moshi_bench stt_bench llm_bench)

say() { echo "gpu-bench: $*" >&2; }
die() {
    say "error: $*"
    exit 1
}

gpu_visible() {
    command -v nvidia-smi >/dev/null 2>&1 || return 1
    local list
    list="$(timeout 30 nvidia-smi -L 2>/dev/null)" || return 1
    [[ "$list" == GPU* ]]
}

# ---------------------------------------------------------------------------------------------
# build

fetch_toolkit() {
    local want have=""
    want="$(printf '%s\n' "${CUDA_PKGS[@]}")"
    [[ -f "$TOOLKIT/.packages" ]] && have="$(cat "$TOOLKIT/.packages")"
    if [[ -x "$CUDA/bin/nvcc" && "$have" == "$want" ]]; then
        say "CUDA toolkit: reusing $CUDA"
    else
        say "CUDA toolkit: pip install --target $TOOLKIT ${CUDA_PKGS[*]} (about 270 MB)"
        local tmp="$TOOLKIT.tmp"
        rm -rf "$tmp"
        mkdir -p "$(dirname "$TOOLKIT")"
        python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --no-compile \
            --target "$tmp" "${CUDA_PKGS[@]}"
        printf '%s\n' "$want" >"$tmp/.packages"
        rm -rf "$TOOLKIT"
        mv "$tmp" "$TOOLKIT"
    fi
    [[ -x "$CUDA/bin/nvcc" && -f "$CUDA/include/cuda.h" && -f "$CUDA/lib/libcudart.so.13" ]] ||
        die "unexpected toolkit layout under $CUDA (need bin/nvcc, include/cuda.h, lib/libcudart.so.13)"
    # The layout a CUDA install has: lib64 beside lib, and the unversioned libcudart.so that
    # candle-kernels' `-l cudart` links (the real one, from nvidia-cuda-runtime).
    ln -sfn lib "$CUDA/lib64"
    ln -sfn libcudart.so.13 "$CUDA/lib/libcudart.so"
}

# Link stubs: the libraries cudarc links (`dynamic-linking`) but that only a GPU machine has.
# Each stub has the real SONAME and exports, as empty functions, every function that cudarc
# declares for that library, so the link checks every symbol and `--as-needed` keeps exactly
# the libraries in use. The binary then loads the real ones at run time. They go in
# $CUDA_HOME/lib/stubs, one of the folders cudarc's build script puts on the link path.
make_stubs() {
    local stubs="$CUDA/lib/stubs" srcs
    mkdir -p "$stubs"
    srcs="$(cargo metadata --format-version 1 --features cuda |
        python3 -c 'import json, os, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "cudarc":
        print(os.path.join(os.path.dirname(p["manifest_path"]), "src"))')"
    [[ -n "$srcs" ]] || die "cargo metadata lists no cudarc package"
    local spec lib soname mod files f n
    for spec in cuda:libcuda.so.1:driver nvrtc:libnvrtc.so.13:nvrtc curand:libcurand.so.10:curand \
        cublas:libcublas.so.13:cublas cublasLt:libcublasLt.so.13:cublaslt; do
        IFS=: read -r lib soname mod <<<"$spec"
        files=()
        while IFS= read -r f; do
            [[ -f "$f/$mod/sys/mod.rs" ]] && files+=("$f/$mod/sys/mod.rs")
        done <<<"$srcs"
        ((${#files[@]})) || die "no cudarc source declares $mod (looked in: $srcs)"
        # Declarations inside cudarc's `extern "C" { fn name(...); }` blocks are indented.
        grep -hoE '^[[:space:]]+fn [A-Za-z_][A-Za-z0-9_]*\(' "${files[@]}" |
            sed -E 's/^[[:space:]]+fn ([A-Za-z0-9_]+)\(/void \1(void) {}/' |
            sort -u >"$stubs/lib$lib.c"
        n="$(wc -l <"$stubs/lib$lib.c")"
        ((n > 0)) || die "found no $mod functions in cudarc"
        gcc -shared -fPIC -w -Wl,-soname,"$soname" -o "$stubs/lib$lib.so" "$stubs/lib$lib.c"
        say "stub $stubs/lib$lib.so ($soname, $n functions)"
    done
}

build() {
    command -v cargo >/dev/null || die "cargo not found: build on a machine with Rust"
    command -v python3 >/dev/null || die "python3 (with pip) is needed to fetch the CUDA compiler"
    command -v gcc >/dev/null || die "gcc is needed (stub libraries, nvcc's host compiler)"
    local cap="${CUDA_COMPUTE_CAP:-}"
    if [[ -z "$cap" ]] && gpu_visible; then
        cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d '. ')"
    fi
    cap="${cap:-90}"
    fetch_toolkit
    make_stubs

    export CUDA_HOME="$CUDA" CUDA_PATH="$CUDA" CUDA_ROOT="$CUDA" CUDA_COMPUTE_CAP="$cap"
    export PATH="$CUDA/bin:$PATH"
    export CARGO_TARGET_DIR="$CUDA_TARGET"
    # Link libopus statically so the GPU machine needs no libopus.so.0.
    export LIBOPUS_STATIC=1
    local nvcc_version
    nvcc_version="$(nvcc --version | grep -oE 'release [0-9.]+, V[0-9.]+' || nvcc --version | tail -n1)"
    say "building ${BINS[*]} --features cuda for sm_$cap in $CARGO_TARGET_DIR (nvcc $nvcc_version)"
    local t0=$SECONDS name
    local examples=()
    for name in "${BINS[@]}"; do examples+=(--example "$name"); done
    nice -n "${GPU_BENCH_NICE:-10}" cargo build --release -p duet-models --features cuda "${examples[@]}"
    say "built in $((SECONDS - t0)) s"

    mkdir -p "$ART"
    {
        echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (+ local changes)')"
        echo "nvcc: $nvcc_version, sm_$cap"
    } >"$ART/BUILD-INFO.txt"
    for name in "${BINS[@]}"; do
        local bin="$CARGO_TARGET_DIR/release/examples/$name" needed glibc
        needed="$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
        [[ " $needed " == *" libcuda.so.1 "* ]] || die "$bin does not link libcuda.so.1: not a CUDA build?"
        rm -f "$ART/$name" "$ART/$name.xz"
        strip -o "$ART/$name.tmp" "$bin"
        xz -T0 -9 -c "$ART/$name.tmp" >"$ART/$name.xz"
        glibc="$(objdump -T "$ART/$name.tmp" | grep -oE 'GLIBC_[0-9.]+' | sort -uV | tail -n1)"
        {
            echo "$name: stripped $(stat -c %s "$ART/$name.tmp") bytes; xz $(stat -c %s "$ART/$name.xz") bytes"
            echo "$name NEEDED: $needed"
            echo "$name newest glibc symbol: $glibc"
        } >>"$ART/BUILD-INFO.txt"
        rm -f "$ART/$name.tmp"
    done
    cat "$ART/BUILD-INFO.txt" >&2
    say "done. On a GPU machine: bash scripts/gpu-bench.sh run"
}

# ---------------------------------------------------------------------------------------------
# run

# Folders holding the CUDA libraries on a GPU machine, one a line: the driver's (libcuda.so.1)
# and those of the pip `nvidia-*` packages (nvidia/cu13/lib: cudart, cublas, cublasLt, curand,
# nvrtc), found through every python3 that has them.
cuda_lib_dirs() {
    local d py cache
    cache="$(ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null || true)"
    if [[ "$cache" != *"libcuda.so.1 "* ]]; then
        for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu \
            /usr/lib64 /usr/local/cuda/compat /usr/local/cuda/lib64; do
            [[ -e "$d/libcuda.so.1" ]] && echo "$d"
        done
    fi
    for py in python3 /opt/*/.venv/bin/python3 /usr/bin/python3; do
        command -v "$py" >/dev/null 2>&1 || continue
        "$py" - <<'EOF' 2>/dev/null || true
import glob, os
try:
    import nvidia
except ImportError:
    raise SystemExit
for base in list(nvidia.__path__):
    for d in sorted(glob.glob(os.path.join(base, "*", "lib"))):
        print(os.path.realpath(d))
EOF
    done
}

# The runnable binary of example $1: .gpu-bench/$1 itself, or unpacked from its .xz.
unpacked() {
    local bin="$ART/$1"
    if [[ ! -x "$bin" || "$ART/$1.xz" -nt "$bin" ]]; then
        [[ -f "$ART/$1.xz" ]] || die "no $ART/$1.xz: run 'scripts/gpu-bench.sh build' first"
        bin="${TMPDIR:-/tmp}/duet-gpu-bench/$1"
        mkdir -p "$(dirname "$bin")"
        xz -dc "$ART/$1.xz" >"$bin"
        chmod +x "$bin"
    fi
    echo "$bin"
}

run_all() {
    local deadline=$((SECONDS + ${GPU_BENCH_SECONDS:-530}))
    local bin stt llm
    bin="$(unpacked "$BIN_NAME")"
    stt="$(unpacked stt_bench)"
    llm="$(unpacked llm_bench)"
    [[ -f "$ART/BUILD-INFO.txt" ]] && sed 's/^/# /' "$ART/BUILD-INFO.txt"

    local dirs
    dirs="$(cuda_lib_dirs | awk 'NF && !seen[$0]++' | paste -sd: -)"
    export LD_LIBRARY_PATH="${dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "# LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    local libs
    libs="$(ldd "$bin" 2>&1 || true)"
    if [[ "$libs" == *"not found"* ]]; then
        echo "$libs"
        die "libraries missing (above): install the NVIDIA driver and the pip packages nvidia-cuda-runtime, nvidia-cublas, nvidia-curand, nvidia-cuda-nvrtc (CUDA 13), or put them on LD_LIBRARY_PATH"
    fi
    grep -E 'libcuda|libcublas|libcurand|libcudart|libnvrtc' <<<"$libs" | sed 's/^[[:space:]]*/# /' || true
    echo "# $(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,compute_cap --format=csv,noheader 2>&1 | head -n1)"

    local status=0
    step() { # step SECONDS [--stt|--llm] ARGS...: one benchmark run under a timeout, within the deadline
        local limit=$1 left=$((deadline - SECONDS)) exe=$bin
        shift
        if [[ ${1:-} == --stt ]]; then
            exe=$stt
            shift
        elif [[ ${1:-} == --llm ]]; then
            exe=$llm
            shift
        fi
        ((limit > left)) && limit=$left
        if ((limit < 10)); then
            echo "# skipped (time budget spent): $BIN_NAME $*"
            status=1
            return
        fi
        echo
        echo "## $(basename "$exe") $*   (timeout ${limit} s)"
        local t0=$SECONDS rc=0
        timeout --kill-after=10 "$limit" "$exe" "$@" || rc=$?
        echo "# exit $rc after $((SECONDS - t0)) s"
        ((rc == 0)) || status=1
    }
    step 60 --device cpu --config tiny --sessions 1,4 --steps 20
    step 90 --device cuda:0 --config tiny --sessions 1,4 --steps 20 --check
    step 360 --device cuda:0 --config moshiko --sessions 1,4,16,32,64 --steps 100 --depformer both --check "$@"
    # Kyutai STT 1B, full size with random weights: streams per 80 ms step.
    step 150 --stt --random-full-size --device cuda:0 --streams 1,16,64,128
    # The cascade's embedded LLM (SmolLM2-135M's shape and format, random weights): prefill
    # and decode tokens per second, Q4_1 and f16. The voice (ONNX Runtime) stays on the CPU.
    step 60 --llm --random-full-size --device cuda:0 --rounds 3
    # Does a session joining stall the others? (skipped if the run above spent the budget)
    step 90 --device cuda:0 --config moshiko --sessions 32 --steps 40 --churn
    echo
    echo "# total $SECONDS s, status $status"
    return "$status"
}

run() {
    if [[ ! -f "$ART/llm_bench.xz" && ! -x "$ART/llm_bench" ]]; then
        command -v cargo >/dev/null || die "no $ART/llm_bench.xz and no cargo to build it"
        build
    fi
    local out="${OUT:-$ART}"
    mkdir -p "$out"
    say "log: $out/gpu-bench.txt"
    run_all "$@" 2>&1 | tee "$out/gpu-bench.txt"
}

case "${1:-}" in
build)
    shift
    (($# == 0)) || die "build takes no arguments"
    build
    ;;
run)
    shift
    run "$@"
    ;;
"")
    if gpu_visible; then
        run
    elif command -v cargo >/dev/null; then
        build
    else
        die "no GPU visible and no cargo: nothing to do"
    fi
    ;;
-h | --help) sed -n '2,22p' "$0" ;;
*) die "unknown command '$1' (build | run [moshi_bench args])" ;;
esac
