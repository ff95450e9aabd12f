#!/usr/bin/env bash
# The GPU run of `forge train` on one lent GPU (an H200), within about eight
# minutes: SmolLM2-135M-Instruct, cold-start SFT, then ERPO vs GRPO from the
# same SFT model, seed and budget, and, with a simulated user that misstates
# facts 20% of the time, ERPO with masking on vs off. Prints a table of
# held-out success and throughput; every run directory (metrics.jsonl,
# curves.svg, checkpoints) is left under $OUT.
#
# Prepare on the build machine (no GPU needed), then carry the binary, the
# model and the bundles with the working tree:
#   CUDARC_CUDA_VERSION=13000 cargo build --release --features cuda
#   cargo run --release -- model fetch smollm2-135m   # prints the GGUF path
#   cargo run --release -- synth --all --out gpu-envs
# Run on the GPU machine:
#   FORGE=target/release/forge MODEL=SmolLM2-135M-Instruct.Q4_1.gguf \
#     ENVS=gpu-envs OUT=$OUT scripts/gpu/train-smollm2.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
FORGE="${FORGE:-target/release/forge}"
MODEL="${MODEL:?the SmolLM2 GGUF (forge model fetch prints its path)}"
ENVS="${ENVS:?a directory of synthesized bundles (forge synth --all --out DIR)}"
OUT="${OUT:-gpu-runs}"
mkdir -p "$OUT"

env_args=()
for bundle in "$ENVS"/*/; do env_args+=(--env "$bundle"); done

config() { # name, then the TOML lines that set the run apart
  local file="$OUT/$1.toml"; shift
  printf '%s\n' "$@" > "$file"
  echo "$file"
}

run() { # name, its config file (layered over the shared one)
  local name="$1" file="$2"
  echo "== $name" >&2
  "$FORGE" train --device cuda --config "$here/train-smollm2.toml" --config "$file" \
    --run-dir "$OUT/$name" "${env_args[@]}" --json | tail -1 > "$OUT/$name.summary.json"
}

run sft "$(config sft "[model]" "init = \"$MODEL\"" "[rl]" "steps = 0")"
sft="$OUT/sft/final"
run erpo "$(config erpo "[model]" "init = \"$sft\"" "[sft]" "steps = 0" "[rl]" "scaling = \"erpo\"")"
run grpo "$(config grpo "[model]" "init = \"$sft\"" "[sft]" "steps = 0" "[rl]" "scaling = \"grpo\"")"
run erpo-unstable-masked "$(config erpo-unstable-masked "[model]" "init = \"$sft\"" "[sft]" "steps = 0" \
  "[rl]" "user_instability = 0.2" "masking = true")"
run erpo-unstable-unmasked "$(config erpo-unstable-unmasked "[model]" "init = \"$sft\"" "[sft]" "steps = 0" \
  "[rl]" "user_instability = 0.2" "masking = false")"

python3 - "$OUT" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print(f"{'run':<24} {'before':>7} {'after':>7} {'rl reward':>10} {'masked':>7} {'rollout tok/s':>14} {'train tok/s':>12} {'s':>6}")
for name in ["sft", "erpo", "grpo", "erpo-unstable-masked", "erpo-unstable-unmasked"]:
    summary = json.loads((out / f"{name}.summary.json").read_text())
    lines = [json.loads(l) for l in (out / name / "metrics.jsonl").read_text().splitlines()]
    rl = [l for l in lines if l["kind"] == "rl"]
    steps = [l for l in lines if l["kind"] in ("sft", "rl")]
    mean = lambda key, rows: sum(r.get(key, 0) for r in rows) / max(len(rows), 1)
    print(f"{name:<24} {summary['heldout_success_before']:>7.3f} {summary['heldout_success_after']:>7.3f} "
          f"{mean('reward', rl):>10.3f} {mean('masked_share', rl):>7.3f} {mean('rollout_tokens_per_s', rl):>14.0f} "
          f"{mean('train_tokens_per_s', steps):>12.0f} {summary['seconds']:>6.0f}")
PY
