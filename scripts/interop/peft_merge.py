"""Checks `forge model merge` against PEFT's own merge (`merge_and_unload`).

PEFT trains nothing here: it puts random LoRA adapters (plain, rsLoRA on
`all-linear`, bf16) on a tiny Llama that Forge writes (one SFT step of the
smoke run), saves them, and merges them into the base in f32; `forge model
merge` folds the saved adapters into the same base, and the script prints
the largest difference between the two merged models' weights.

Needs PyTorch, transformers and peft:
    python3 scripts/interop/peft_merge.py target/release/forge
"""

import json
import pathlib
import subprocess
import sys
import tempfile

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import load_file
from transformers import LlamaForCausalLM

CASES = [
    ("plain", dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"]), torch.float32),
    ("rslora", dict(r=8, lora_alpha=16, use_rslora=True, target_modules="all-linear"), torch.float32),
    ("bf16", dict(r=16, lora_alpha=32, target_modules=["self_attn.o_proj", "mlp.gate_proj"]), torch.bfloat16),
]


def main(forge: str, work: pathlib.Path) -> int:
    config = work / "base.toml"
    config.write_text("[sft]\nsteps = 1\nbatch = 2\n[rl]\nsteps = 0\n[eval]\nevery = 0\n")
    subprocess.run([forge, "train", "--preset", "smoke", "--config", config,
                    "--run-dir", work / "base", "--json"], check=True, capture_output=True)
    base = work / "base" / "final"
    base_weights = load_file(base / "model.safetensors")
    torch.manual_seed(0)
    worst_of_all = 0.0
    for name, settings, dtype in CASES:
        adapters = work / f"lora-{name}"
        trained = get_peft_model(LlamaForCausalLM.from_pretrained(base, dtype=dtype),
                                 LoraConfig(init_lora_weights=False, **settings))
        trained.to(dtype).save_pretrained(adapters)
        saved = json.loads((adapters / "adapter_config.json").read_text())
        dtypes = {str(t.dtype) for t in load_file(adapters / "adapter_model.safetensors").values()}
        peft = PeftModel.from_pretrained(LlamaForCausalLM.from_pretrained(base), adapters)
        theirs = peft.merge_and_unload().state_dict()
        merged = work / f"merged-{name}"
        subprocess.run([forge, "model", "merge", adapters, "--base", base, "--out", merged],
                       check=True, capture_output=True)
        ours = load_file(merged / "model.safetensors")
        worst = max((ours[key] - theirs[key]).abs().max().item() for key in ours)
        changed = sum(not torch.equal(ours[key], base_weights[key]) for key in ours)
        worst_of_all = max(worst_of_all, worst)
        print(f"{name:>6}: r {saved['r']}, alpha {saved['lora_alpha']}, rslora {saved['use_rslora']}, "
              f"{len(saved['target_modules'])} target_modules, adapters {sorted(dtypes)}: "
              f"{changed} of {len(ours)} tensors changed; largest |forge - peft| {worst:.1e}")
    return 0 if worst_of_all <= 1e-6 else 1


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as work:
        sys.exit(main(sys.argv[1], pathlib.Path(work)))
