#!/usr/bin/env python3
"""PyTorch's figures for the shapes `forge bench model` measures.

SmolLM2-135M's shape with random weights (transformers' LlamaForCausalLM,
eager PyTorch, no compilation): a forward pass, a training step (forward,
backward, AdamW; micro-batches with accumulated gradients) and sampling with
`generate` (temperature 1, every row producing exactly --new-tokens tokens).
float32 runs its matrix products on TF32 tensor cores, as burn's CUDA
backend does. Each --dtype (float32 and bfloat16 by default) has a model of
its own, and each shape is measured in every dtype before the next shape:
importing PyTorch is paid once, and a time limit that cuts the run short
leaves both dtypes' figures for the shapes it reached.
Each measurement is the mean of --repeats timed repetitions after one
warm-up, printed as a JSON line with the same fields as
`forge bench model --json` (plus the framework and dtype).
"""

import argparse
import json
import sys
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def shapes(text):
    if text == "none":
        return []
    out = []
    for item in text.split(","):
        batch, seq = item.lower().split("x")
        out.append((int(batch), int(seq)))
    return out


def sizes(text):
    return [] if text == "none" else [int(item) for item in text.split(",")]


def dtypes(text):
    names = text.split(",")
    for name in names:
        if name not in ("float32", "bfloat16"):
            raise argparse.ArgumentTypeError(f"{name!r} is not float32 or bfloat16")
    return names


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", type=dtypes, default=dtypes("float32,bfloat16"))
    parser.add_argument("--attention", choices=["sdpa", "eager"], default="sdpa")
    parser.add_argument("--forward", type=shapes, default=shapes("1x128,16x1024"))
    parser.add_argument("--train", type=shapes, default=shapes("16x1024,64x1024"))
    parser.add_argument("--micro-batch", type=int, default=16)
    parser.add_argument("--decode", type=sizes, default=sizes("1,32,256"))
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    # burn's CUDA matmul runs f32 inputs on TF32 tensor cores; PyTorch's
    # float32 does the same here, so that the two compare like for like.
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    config = LlamaConfig(
        vocab_size=49152,
        hidden_size=576,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        intermediate_size=1536,
        rope_theta=100000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        max_position_embeddings=8192,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    config._attn_implementation = args.attention
    models = {
        dtype: LlamaForCausalLM(config).to(device=device, dtype=getattr(torch, dtype))
        for dtype in args.dtype
    }
    vocab = config.vocab_size

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def timed(work):
        work()
        sync()
        started = time.perf_counter()
        for _ in range(args.repeats):
            work()
        sync()
        return (time.perf_counter() - started) / args.repeats

    def report(dtype, phase, batch, seq, tokens, seconds):
        line = {
            "phase": phase,
            "batch": batch,
            "seq": seq,
            "tokens": tokens,
            "seconds": seconds,
            "tokens_per_s": tokens / seconds,
            "framework": "torch",
            "dtype": dtype,
            "attention": args.attention,
        }
        print(json.dumps(line), flush=True)

    for batch, seq in args.forward:
        ids = torch.randint(vocab, (batch, seq), device=device)
        for dtype, model in models.items():
            model.eval()

            def forward():
                with torch.no_grad():
                    model(input_ids=ids, use_cache=False).logits

            report(dtype, "forward", batch, seq, batch * seq, timed(forward))

    for batch, seq in args.train:
        ids = torch.randint(vocab, (batch, seq), device=device)
        for dtype, model in models.items():
            model.train()
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)

            def step():
                for chunk in ids.split(args.micro_batch):
                    loss = model(input_ids=chunk, labels=chunk, use_cache=False).loss
                    (loss * chunk.shape[0] / batch).backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)

            report(dtype, "train", batch, seq, batch * seq, timed(step))
            del optimizer
            model.zero_grad(set_to_none=True)

    for batch in args.decode:
        ids = torch.randint(3, vocab, (batch, args.prompt), device=device)
        mask = torch.ones_like(ids)
        for dtype, model in models.items():
            model.eval()

            def decode():
                with torch.no_grad():
                    out = model.generate(
                        input_ids=ids,
                        attention_mask=mask,
                        do_sample=True,
                        temperature=1.0,
                        top_p=1.0,
                        top_k=0,
                        max_new_tokens=args.new_tokens,
                        min_new_tokens=args.new_tokens,
                    )
                assert out.shape == (batch, args.prompt + args.new_tokens), out.shape

            report(dtype, "decode", batch, args.prompt, batch * args.new_tokens, timed(decode))


if __name__ == "__main__":
    sys.exit(main())
