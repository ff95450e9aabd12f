#!/usr/bin/env bash
# Runs on the GPU machine, in the working tree a call carried there; what
# scripts/gpu/prepare.sh staged arrives under .gpu/. Two stages, two calls,
# the second while the machine is still warm from the first:
#   device.sh bench   (carry .gpu/a) unpacks forge and the environments,
#                     keeps the model's first part, and measures forge's and
#                     PyTorch's throughput (scripts/gpu/bench-model.sh);
#   device.sh train [SECONDS]
#                     (carry .gpu/b) joins the model, checks its sha256, and
#                     runs scripts/gpu/train-smollm2.sh; its runs' time
#                     limits fit a call of SECONDS (400 by default), for a
#                     call the device budget leaves less time.
# Results go to $OUT (which comes back), with the kernels compiled so far
# (kernels.tar.xz): staged again by prepare.sh (KERNELS=), they spare a
# later session on the same kind of GPU the compiling (PTX is built for the
# GPU's architecture).
set -euo pipefail
cd "$(dirname "$0")/../.."
here=scripts/gpu
stage=/tmp/forge-gpu
OUT="${OUT:-$stage/out}"
mkdir -p "$stage" "$OUT"
# Both calls' forge processes share the kernels compiled by those before
# them: compiling is much of a first run's time.
export FORGE_CACHE_DIR="$stage/cache"

# NVRTC (which compiles the kernels at run time) and the CUDA headers it
# includes, from the machine's toolkit or PyTorch's wheels.
cuda_env() {
  if [[ -z "${CUDA_PATH:-}" ]] && command -v nvcc > /dev/null; then
    CUDA_PATH="$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")"
  fi
  export CUDA_PATH="${CUDA_PATH:-/usr/local/cuda}"
  local dirs
  # Not the toolkit's stubs/ folder: its libcuda.so is a link-time stub that
  # would shadow the driver's (CUDA_ERROR_STUB_LIBRARY).
  dirs="$( (find "$CUDA_PATH" /usr/local /opt /usr/lib -name stubs -prune -o -name 'libnvrtc.so*' -printf '%h\n' 2> /dev/null || true) \
    | sort -u | paste -sd:)"
  export LD_LIBRARY_PATH="${dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  echo "CUDA_PATH=$CUDA_PATH"
  echo "NVRTC in: ${dirs:-(none found)}"
  ls "$CUDA_PATH/include/cuda_runtime.h" > /dev/null || echo "warning: no CUDA headers under $CUDA_PATH/include" >&2
}

# Leaves the cache's kernels in $OUT, then exits with the stage's status.
keep_kernels_and_exit() {
  if [[ -d "$FORGE_CACHE_DIR/kernels" ]]; then
    tar -C "$FORGE_CACHE_DIR" -cJf "$OUT/kernels.tar.xz" kernels
  fi
  exit "$1"
}

case "${1:-}" in
  bench)
    cp .gpu/a/model.part1 .gpu/a/model.sha256 "$stage/"
    xz -dc .gpu/a/forge.xz > "$stage/forge" && chmod +x "$stage/forge"
    rm -rf "$stage/envs" && tar -C "$stage" -xJf .gpu/a/envs.tar.xz
    if [[ -f .gpu/a/kernels.tar.xz ]]; then
      mkdir -p "$FORGE_CACHE_DIR" && tar -C "$FORGE_CACHE_DIR" -xJf .gpu/a/kernels.tar.xz
    fi
    cuda_env
    status=0
    FORGE="$stage/forge" OUT="$OUT" "$here/bench-model.sh" || status=$?
    keep_kernels_and_exit "$status"
    ;;
  train)
    # The default limits (train-smollm2.sh's) fill a call of 400 s.
    seconds="${2:-400}"
    [[ "$seconds" =~ ^[0-9]+$ ]] || {
      echo "device.sh train: SECONDS must be a whole number, not '$seconds'" >&2
      exit 2
    }
    [[ -f "$stage/model.part1" && -x "$stage/forge" ]] || {
      echo "the first stage's files are gone (the machine went cold): run 'device.sh bench' first" >&2
      exit 1
    }
    cat "$stage/model.part1" .gpu/b/model.part2 > "$stage/model.gguf"
    (cd "$stage" && sha256sum -c "$OLDPWD/.gpu/b/model.sha256")
    cuda_env
    export SFT_SECONDS=$(( 90 * seconds / 400 )) RL_SECONDS=$(( 130 * seconds / 400 ))
    export KILL_AFTER=$(( 75 * seconds / 400 ))
    # The runs' checkpoints stay on the machine; what comes back (at most
    # eight files) is one archive of their metrics, curves, configs and logs.
    runs="$stage/runs"
    rm -rf "$runs"
    status=0
    FORGE="$stage/forge" MODEL="$stage/model.gguf" ENVS="$stage/envs" OUT="$runs" \
      "$here/train-smollm2.sh" || status=$?
    (cd "$runs" && find . \( -name checkpoints -o -name final -o -name reference \) -prune -o -type f -print0 \
      | tar -cJf "$OUT/train-runs.tar.xz" --null -T -)
    keep_kernels_and_exit "$status"
    ;;
  *)
    echo "usage: $0 bench | $0 train [SECONDS]" >&2
    exit 2
    ;;
esac
