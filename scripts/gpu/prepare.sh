#!/usr/bin/env bash
# Stages what the GPU runs need under .gpu/ (git-ignored), on the build
# machine: no GPU is needed here, and the GPU machine has neither a Rust
# toolchain nor a network. A call to the GPU machine carries at most 64 MiB
# with the working tree, and the SmolLM2 GGUF alone is 94 MiB, so the
# payload is split over two calls (see scripts/gpu/README.md):
#   .gpu/a  forge built with CUDA (stripped, xz), the synthesized
#           environments, and the model's first part;
#   .gpu/b  the model's second part.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CUDARC_CUDA_VERSION="${CUDARC_CUDA_VERSION:-13000}"

cargo build --release --features cuda
forge=target/release/forge
model="$("$forge" model fetch smollm2-135m)"

rm -rf .gpu && mkdir -p .gpu/a .gpu/b
strip -o .gpu/forge "$forge"
xz -T0 -9 -c .gpu/forge > .gpu/a/forge.xz && rm .gpu/forge
"$forge" synth --all --out .gpu/envs > /dev/null
tar -C .gpu -cJf .gpu/a/envs.tar.xz envs && rm -rf .gpu/envs

# The first part fills call a up to 56 MiB with everything else in it; the
# rest of the model goes in call b. The checksum travels in both.
tree=$(git ls-files -z | xargs -0 cat | wc -c)
used=$(( tree + $(stat -c %s .gpu/a/forge.xz) + $(stat -c %s .gpu/a/envs.tar.xz) ))
first=$(( 56 * 1024 * 1024 - used ))
(( first > 0 )) || { echo "call a is full before the model: $used bytes" >&2; exit 1; }
head -c "$first" "$model" > .gpu/a/model.part1
tail -c +"$(( first + 1 ))" "$model" > .gpu/b/model.part2
(cd "$(dirname "$model")" && sha256sum "$(basename "$model")") | awk '{print $1"  model.gguf"}' \
  | tee .gpu/a/model.sha256 > .gpu/b/model.sha256
du -b .gpu/a .gpu/b | awk '{printf "%s %.1f MiB\n", $2, $1 / 1048576}'
