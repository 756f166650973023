#!/usr/bin/python3
"""A LLaMA-style decoder layer's step with a KV cache, exported to ONNX.

  llama_decode.py OUT_DIR [--d 2048] [--heads 16] [--ff 5632] [--past 511]
                  [--seq 1] [--layers 1] [--seed 0]

Inputs: x [1, seq, d] (the new tokens' hidden states) and, per layer,
past_k_L / past_v_L [1, heads, past, d/heads]. Outputs: y and present_k_L /
present_v_L [1, heads, past + seq, d/heads] (the cache with the new rows
concatenated on the sequence axis). Rotary embedding at positions past ..
past + seq - 1, causal within the new tokens. Random weights (seeded):
nothing is downloaded. Writes decode.onnx, decode.in.*.npy and PyTorch's
outputs decode.out.*.npy.
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
from torch import nn


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from gen_models import LlamaBlock, rotate_half  # noqa: E402  (the test models' LLaMA block)


class DecodeLayer(LlamaBlock):
    """gen_models' LLaMA block (RMSNorm, rotary embedding, SwiGLU) run as a
    decode step: the rotary tables at positions past .. past + seq - 1, and
    new token i sees the whole cache and new tokens 0..i."""

    def __init__(self, d, heads, ff, past, seq):
        super().__init__(d, heads, ff, max_seq=past + seq)
        self.cos, self.sin = self.cos[past:].clone(), self.sin[past:].clone()
        self.mask = torch.ones(seq, past + seq, dtype=torch.bool).tril(diagonal=past)

    def forward(self, x, past_k, past_v):
        b, s, d = x.shape
        h = self.n1(x)
        q, k, v = (t(h).view(b, s, self.h, self.dh).transpose(1, 2) for t in (self.q, self.k, self.v))
        q = q * self.cos + rotate_half(q) * self.sin
        k = k * self.cos + rotate_half(k) * self.sin
        k_all, v_all = torch.cat((past_k, k), dim=2), torch.cat((past_v, v), dim=2)
        scores = torch.matmul(q, k_all.transpose(-1, -2)) / math.sqrt(self.dh)
        scores = scores.masked_fill(~self.mask, float("-inf"))
        a = torch.matmul(torch.softmax(scores, dim=-1), v_all).transpose(1, 2).reshape(b, s, d)
        x = x + self.o(a)
        h = self.n2(x)
        g = self.gate(h)
        return x + self.down(g * torch.sigmoid(g) * self.up(h)), k_all, v_all


class Decoder(nn.Module):
    def __init__(self, layers, **kw):
        super().__init__()
        self.layers = nn.ModuleList(DecodeLayer(**kw) for _ in range(layers))

    def forward(self, x, *cache):
        present = []
        for i, layer in enumerate(self.layers):
            x, k, v = layer(x, cache[2 * i], cache[2 * i + 1])
            present += [k, v]
        return (x, *present)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--d", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--ff", type=int, default=5632)
    p.add_argument("--past", type=int, default=511)
    p.add_argument("--seq", type=int, default=1)
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--name", default="decode")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    dh = a.d // a.heads
    model = Decoder(a.layers, d=a.d, heads=a.heads, ff=a.ff, past=a.past, seq=a.seq).eval()
    for m in model.modules():  # scaled like a trained model's, so the activations stay O(1)
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=1.0 / math.sqrt(m.in_features))
    x = torch.randn(1, a.seq, a.d)
    cache = [torch.randn(1, a.heads, a.past, dh) for _ in range(2 * a.layers)]
    names = ["x"] + [f"past_{kv}_{i}" for i in range(a.layers) for kv in "kv"]
    outs = ["y"] + [f"present_{kv}_{i}" for i in range(a.layers) for kv in "kv"]
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, f"{a.name}.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (x, *cache), path, input_names=names, output_names=outs,
                          opset_version=17, do_constant_folding=True)
        got = model(x, *cache)
    for n, t in zip(names, (x, *cache)):
        np.save(os.path.join(a.out, f"{a.name}.in.{n}.npy"), t.numpy())
    for n, t in zip(outs, got):
        np.save(os.path.join(a.out, f"{a.name}.out.{n}.npy"), t.numpy())
    print(path)


if __name__ == "__main__":
    main()
