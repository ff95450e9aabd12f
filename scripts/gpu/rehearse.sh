#!/usr/bin/env bash
# The GPU code path, tested on a machine without a GPU. The model tests
# (trainer/tests: logits against the references, SmolLM2's included; batched,
# cached and multi-turn decoding with the device-side draw; the training
# objectives through autodiff; checkpoints) run on burn's WebGPU backend,
# whose cubecl kernel sources and fusion are the CUDA backend's
# (compiled to WGSL: tensor cores, NVRTC and bf16 are CUDA's alone), through
# Mesa's software Vulkan driver (lavapipe). Run it before spending GPU time
# on a change to the model, the draw or the objectives: three minutes of tests
# on two cores, after a build of a quarter of an hour (half an hour from a
# cold cache).
#   scripts/gpu/rehearse.sh
# AUTOTUNE=1 builds with autotuned kernels too (`--features wgpu,autotune`),
# as `--features cuda,autotune` runs on a GPU: slower, every candidate
# kernel is compiled and timed.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! compgen -G '/usr/share/vulkan/icd.d/*.json' > /dev/null \
  && ! compgen -G '/etc/vulkan/icd.d/*.json' > /dev/null; then
  echo "no Vulkan driver: installing Mesa's (lavapipe)" >&2
  sudo=()
  (( EUID == 0 )) || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mesa-vulkan-drivers > /dev/null
fi
# wgpu probes EGL too, which complains without a runtime directory.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
# The real SmolLM2 for its logits test (fetched once, then cached).
FORGE_SMOLLM2_GGUF="${FORGE_SMOLLM2_GGUF:-$(cargo run --release --quiet -- model fetch smollm2-135m)}"
export FORGE_SMOLLM2_GGUF

# One test at a time: lavapipe spreads each kernel over every core.
features=wgpu
[[ "${AUTOTUNE:-0}" == 1 ]] && features=wgpu,autotune
cargo test --release -p forge-trainer --features "$features" --test '*' -- --test-threads 1
