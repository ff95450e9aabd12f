#!/usr/bin/env bash
# The GPU run of `forge train` on one lent GPU (an H200), in about eight
# minutes: SmolLM2-135M-Instruct, cold-start SFT, then from the same SFT
# model, seed and time budget, side by side on the one GPU: ERPO, GRPO, and
# with a simulated user that misstates facts 20% of the time, ERPO with
# masking on and off. Each run stops at the end of its steps or before a
# step that would end past its time limit (with an evaluation). Prints
# `forge compare`'s tables (the settings that set the runs apart, held-out
# success and throughput) and the GPU's share of wall time; every run
# directory (metrics.jsonl, curves.svg, checkpoints) and the comparison
# (compare.svg, compare.json) are left under $OUT.
#
# Usually run by `scripts/gpu/device.sh train` (see scripts/gpu/README.md);
# by hand:
#   FORGE=target/release/forge MODEL=SmolLM2-135M-Instruct.Q4_1.gguf \
#     ENVS=dir-of-bundles OUT=dir scripts/gpu/train-smollm2.sh
# Time limits (whole seconds): SFT_SECONDS (default 90), RL_SECONDS (130);
# a run stops before a step that would end past its limit, and is killed
# KILL_AFTER (75) seconds after it.
# EXTRA_CONFIG names a TOML file layered over the shared settings (each
# run's own come last).
# DEVICE=cpu with MODEL=tiny, a small environment and a small EXTRA_CONFIG
# tries the script's plumbing on a CPU (the test
# `train::the_gpu_training_script_runs_on_the_cpu` does).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
FORGE="${FORGE:-target/release/forge}"
MODEL="${MODEL:?the SmolLM2 GGUF (forge model fetch prints its path)}"
ENVS="${ENVS:?a directory of synthesized bundles (forge synth --all --out DIR)}"
OUT="${OUT:-gpu-runs}"
SFT_SECONDS="${SFT_SECONDS:-90}"
RL_SECONDS="${RL_SECONDS:-130}"
KILL_AFTER="${KILL_AFTER:-75}"
DEVICE="${DEVICE:-cuda}"
mkdir -p "$OUT"

env_args=()
for bundle in "$ENVS"/*/; do env_args+=(--env "$bundle"); done

config() { # name, then the TOML lines that set the run apart
  local file="$OUT/$1.toml"; shift
  printf '%s\n' "$@" > "$file"
  echo "$file"
}

run() { # name, its config file (layered over the shared ones), time limit
  local name="$1" file="$2" limit="$3" status=0
  # A hard stop after the time limit, for a step or evaluation that runs
  # long (the checkpoint is written before the last evaluation).
  timeout $(( limit + KILL_AFTER )) "$FORGE" train --device "$DEVICE" --time-limit "$limit" \
    --config "$here/train-smollm2.toml" ${EXTRA_CONFIG:+--config "$EXTRA_CONFIG"} --config "$file" \
    --run-dir "$OUT/$name" "${env_args[@]}" --json > "$OUT/$name.log" 2>&1 || status=$?
  if (( status )); then
    echo "$name: exit $status; the end of its log:" >&2
    tail -5 "$OUT/$name.log" >&2
  fi
  (grep '^{' "$OUT/$name.log" || true) | tail -1 > "$OUT/$name.summary.json"
  return "$status"
}
failed=0

# shellcheck source=monitor.sh
source "$here/monitor.sh"

echo "== sft" >&2
monitor "$OUT/gpu-sft.csv"
run sft "$(config sft "[model]" "init = \"$MODEL\"" "[rl]" "steps = 0")" "$SFT_SECONDS" || failed=1
unmonitor "$OUT/gpu-sft.csv"
if [[ -d "$OUT/sft/final" ]]; then
  sft="$OUT/sft/final"
elif [[ -f "$OUT/sft/checkpoints/latest" ]]; then
  sft="$OUT/sft/checkpoints/$(cat "$OUT/sft/checkpoints/latest")"
else
  echo "the SFT run left no model to start RL from" >&2
  exit 1
fi

rl=(erpo grpo erpo-unstable-masked erpo-unstable-unmasked)
echo "== ${rl[*]} (in parallel)" >&2
monitor "$OUT/gpu-rl.csv"
# The RL runs' starting point is the SFT run's final evaluation.
from=("[model]" "init = \"$sft\"" "[sft]" "steps = 0" "[eval]" "every = 3" "at_start = false"
  "[optim]" "micro_batch = 1")
pids=()
run erpo "$(config erpo "${from[@]}" "[rl]" 'scaling = "erpo"')" "$RL_SECONDS" & pids+=($!)
run grpo "$(config grpo "${from[@]}" "[rl]" 'scaling = "grpo"')" "$RL_SECONDS" & pids+=($!)
run erpo-unstable-masked "$(config erpo-unstable-masked "${from[@]}" \
  "[rl]" "user_instability = 0.2" "masking = true")" "$RL_SECONDS" & pids+=($!)
run erpo-unstable-unmasked "$(config erpo-unstable-unmasked "${from[@]}" \
  "[rl]" "user_instability = 0.2" "masking = false")" "$RL_SECONDS" & pids+=($!)
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
unmonitor "$OUT/gpu-rl.csv"

# The table (settings that differ, held-out success, reward, masking,
# throughput), the curves as SVG and their numbers as JSON. An RL run reads
# as the SFT run's continuation: its `before` is the SFT run's last evaluation.
dirs=()
for name in sft "${rl[@]}"; do
  if [[ -f "$OUT/$name/config.toml" ]]; then dirs+=("$OUT/$name"); fi
done
"$FORGE" compare "${dirs[@]}" --plot "$OUT/compare.svg" --json > "$OUT/compare.json" || failed=1
"$FORGE" compare "${dirs[@]}" || failed=1

python3 - "$OUT" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
for phase in ["sft", "rl"]:
    path = out / f"gpu-{phase}.csv"
    samples = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                samples.append([float(v) for v in line.split(",")])
            except ValueError:
                pass
    if samples:
        busy = sum(s[0] for s in samples) / len(samples)
        peak = max(s[1] for s in samples) / 1024
        print(f"GPU during {phase}: {busy:.0f}% busy on average over {len(samples)} s, peak memory {peak:.1f} GiB")
compared = out / "compare.json"
if compared.exists():
    print("\nheld-out success by step (the curves):")
    for name, points in json.loads(compared.read_text())["curves"]["held-out success"].items():
        print(f"  {name}: " + ", ".join(f"{step:.0f}:{success:.3f}" for step, success in points))
PY
exit "$failed"
