#!/usr/bin/env bash
# The policy model's throughput on one GPU, forge against PyTorch, in the
# same shapes (SmolLM2-135M, random weights): a forward pass, training steps
# at 16x1024 and 64x1024 (forward, backward, AdamW) and decoding at batch
# 1, 32 and 256. Prints a table with forge's share of PyTorch's tokens/s;
# the measurements are left in $OUT as JSON lines.
#   FORGE=path/to/forge OUT=dir scripts/gpu/bench-model.sh
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
FORGE="${FORGE:-target/release/forge}"
OUT="${OUT:-gpu-bench}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

# Each phase and each side gets a bounded time of its own, so that one that
# fails or hangs still leaves the others' figures; about 460 s at most in
# all. Much of a phase's time on a fresh machine is compiling kernels
# (NVRTC, about half a second each, with the GPU idle). forge built without
# the `autotune` feature (as prepare.sh builds it) compiles one kernel per
# product; autotuning compiles every candidate, which made SmolLM2's first
# f32 forward pass take 50 s on an H200's host, 16x1024 another 64 s.
# forge keeps what it compiled in its cache (FORGE_CACHE_DIR), so each
# phase, and the training call after this one, compiles only the kernels no
# earlier process has: the f32 phase, which pays for most of them, gets the
# most time, and its measurements come out one by one as they finish.
# forge's bf16 is mixed precision (bf16 products, f32 weights and
# optimizer), measured on the headline shapes; PyTorch's is bf16 throughout.
# The training steps are measured once more with rank-16 LoRA adapters on
# every projection (the weights frozen), against forge's full bf16 steps.
# TORCH_ARGS adds arguments to bench_torch.py (e.g. `--forward none --train
# none --decode 256` to measure one shape again).
: > "$OUT/bench-forge.jsonl"
# Each phase's GPU memory is sampled into a file of its own, kept out of
# $OUT (a device call brings back eight files at most): its peak is the
# most the phase's largest shape (64x1024 training) needed, pools included.
# shellcheck source=monitor.sh
source "$here/monitor.sh"
samples="$(mktemp -d)"
phase() { # name, seconds, then the arguments that pick the phase
  local name="$1" seconds="$2"; shift 2
  echo "== forge bench model $*" >&2
  monitor "$samples/$name.csv"
  timeout "$seconds" "$FORGE" bench model --device cuda "$@" --json | tee -a "$OUT/bench-forge.jsonl"
  unmonitor "$samples/$name.csv"
}
phase f32 240
phase bf16 100 --precision bf16 --forward none --train 16x1024,64x1024 --decode 256
phase lora 30 --precision bf16 --lora-rank 16 --forward none --train 16x1024,64x1024 --decode none --repeats 2
# PyTorch compiles nothing (eager), but importing it takes about 20 s: one
# process measures both dtypes, shape by shape.
echo "== torch float32,bfloat16" >&2
monitor "$samples/torch.csv"
timeout 90 "$PYTHON" "$here/bench_torch.py" --device cuda --repeats 1 ${TORCH_ARGS:-} \
  | tee "$OUT/bench-torch.jsonl"
unmonitor "$samples/torch.csv"

"$PYTHON" - "$OUT" "$samples" <<'PY'
import json, pathlib, sys
out, samples = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
def load(name, lora_rank=0, **match):
    """Tokens/s by (phase, batch, seq) of the rows of `name` that match."""
    path = out / name
    rows = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if row.get("lora_rank", 0) != lora_rank or row.get("activations", "kept") != "kept":
                continue
            if all(row.get(key) == value for key, value in match.items()):
                rows[(row["phase"], row["batch"], row["seq"])] = row["tokens_per_s"]
    return rows
forge = load("bench-forge.jsonl", precision="f32")
forge16 = load("bench-forge.jsonl", precision="bf16")
f32 = load("bench-torch.jsonl", dtype="float32")
bf16 = load("bench-torch.jsonl", dtype="bfloat16")
cell = lambda value: f"{value:>12,.0f}" if value else f"{'-':>12}"
ratio = lambda a, b: f"{a / b:>9.2f}x" if a and b else f"{'-':>10}"
print(f"{'phase':<8} {'shape':<12} {'forge f32':>12} {'torch tf32':>12} {'forge bf16':>12} {'torch bf16':>12} {'f32 ratio':>10} {'bf16 ratio':>10}   (tokens/s)")
for key in sorted(set(forge) | set(forge16) | set(f32) | set(bf16), key=lambda k: (["forward", "train", "decode"].index(k[0]), k[1], k[2])):
    phase, batch, seq = key
    shape = f"{batch}x{seq}" if phase != "decode" else f"b{batch} p{seq}"
    a, b, c, d = forge.get(key), f32.get(key), forge16.get(key), bf16.get(key)
    print(f"{phase:<8} {shape:<12} {cell(a)} {cell(b)} {cell(c)} {cell(d)} {ratio(a, b)} {ratio(c, d)}")
lora = load("bench-forge.jsonl", 16, precision="bf16")
if lora:
    print(f"\n{'phase':<8} {'shape':<12} {'full bf16':>12} {'LoRA r16':>12} {'ratio':>10}   (forge tokens/s)")
    for key in sorted(lora):
        phase, batch, seq = key
        print(f"{phase:<8} {f'{batch}x{seq}':<12} {cell(forge16.get(key))} {cell(lora[key])} {ratio(lora[key], forge16.get(key))}")
peaks = []
for name, label in [("f32", "forge f32"), ("bf16", "forge bf16"), ("lora", "forge LoRA r16"), ("torch", "torch (both dtypes)")]:
    path = samples / f"{name}.csv"
    used = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                used.append(float(line.split(",")[1]))
            except (IndexError, ValueError):
                pass
    if used:
        peaks.append(f"{label} {max(used) / 1024:.1f} GiB")
if peaks:
    print("\npeak GPU memory by phase (sampled once a second): " + ", ".join(peaks))
PY
