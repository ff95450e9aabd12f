#!/usr/bin/env bash
# Stages what the GPU runs need under .gpu/ (git-ignored), on the build
# machine: no GPU is needed here, and the GPU machine has neither a Rust
# toolchain nor a network. A call to the GPU machine carries at most 64 MiB
# with the working tree, and the SmolLM2 GGUF alone is 94 MiB, so the
# payload is split over two calls (see scripts/gpu/README.md):
#   .gpu/a  forge built with CUDA (stripped, xz), the synthesized
#           environments, and the model's first part;
#   .gpu/b  the model's second part (both calls carry about the same).
# KERNELS=path/to/kernels.tar.xz adds to .gpu/a the kernels an earlier
# session's calls brought back from the same kind of GPU (device.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CUDARC_CUDA_VERSION="${CUDARC_CUDA_VERSION:-13000}"

cargo build --release --features cuda
forge="${CARGO_TARGET_DIR:-target}/release/forge"
model="$("$forge" model fetch smollm2-135m)"

rm -rf .gpu && mkdir -p .gpu/a .gpu/b
strip -o .gpu/forge "$forge"
xz -T0 -9 -c .gpu/forge > .gpu/a/forge.xz && rm .gpu/forge
"$forge" synth --all --out .gpu/envs > /dev/null
tar -C .gpu -cJf .gpu/a/envs.tar.xz envs && rm -rf .gpu/envs
if [[ -n "${KERNELS:-}" ]]; then
  tar -tJf "$KERNELS" > /dev/null || { echo "KERNELS=$KERNELS is not an xz tar archive" >&2; exit 1; }
  cp "$KERNELS" .gpu/a/kernels.tar.xz
fi

# Each call carries the working tree (tracked files and untracked ones git
# does not ignore) plus its part; the model is split so that both calls
# carry about the same, and each must stay under the limit.
limit=$(( 62 * 1024 * 1024 ))
tree=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } \
  | xargs -0 stat -c %s 2> /dev/null | awk '{ sum += $1 } END { print sum + 0 }')
size() { stat -c %s "$@" | awk '{ sum += $1 } END { print sum + 0 }'; }
extra=$(size .gpu/a/*)
model_size=$(size "$model")
first=$(( (model_size - extra) / 2 ))
(( first > 0 )) || { echo "call a is full before the model: $extra bytes" >&2; exit 1; }
head -c "$first" "$model" > .gpu/a/model.part1
tail -c +"$(( first + 1 ))" "$model" > .gpu/b/model.part2
(cd "$(dirname "$model")" && sha256sum "$(basename "$model")") | awk '{print $1"  model.gguf"}' \
  | tee .gpu/a/model.sha256 > .gpu/b/model.sha256
for call in a b; do
  total=$(( tree + $(size .gpu/$call/*) ))
  awk -v call="$call" -v total="$total" 'BEGIN { printf "call %s carries %.1f MiB\n", call, total / 1048576 }'
  (( total <= limit )) || { echo "call $call is over $(( limit >> 20 )) MiB" >&2; exit 1; }
done
