#!/usr/bin/python3
"""A small LLaMA-style language model (random weights), exported to ONNX as
the two graphs a generation loop runs, with PyTorch's own greedy generation
saved to check against.

  export_llama.py OUT_DIR [--layers 8] [--d 256] [--heads 4] [--ff 688]
                  [--vocab 512] [--prompt 16] [--steps 8] [--max-seq 2048]

Writes:
  prefill.onnx  ids [1, seq] -> logits [1, seq, vocab], present_{k,v}_L
                [1, heads, seq, d/heads] (the prompt's cache); `seq` symbolic.
  decode.onnx   ids [1, 1], pos [1] (the new token's position), past_{k,v}_L
                [1, heads, past, d/heads] -> logits [1, 1, vocab],
                present_{k,v}_L = Concat(past, new) on the sequence axis;
                `past` symbolic. One new token sees the whole cache: no mask.
  decoder.onnx  both in one graph, as a serving export has it: ids [1, seq],
                past_{k,v}_L [1, heads, past, d/heads] -> logits [1, seq,
                vocab], present_{k,v}_L; `seq` and `past` symbolic, past 0
                for the prompt (`fusetune tune decoder.onnx --dim seq=1,16
                --dim past=0,255`), positions and the causal mask from them.
  decoder_check/  one call of decoder.onnx to check against: the prompt's
                last 3 tokens after the cache of the others (ids.npy,
                past_{k,v}_L.npy) and PyTorch's logits.npy
  prompt.npy    the prompt's token ids, int64 [1, prompt]
  torch_tokens.npy  the tokens PyTorch's greedy loop generates, int64 [steps]
  torch_logits.npy  its logits of the prompt's last token and of every step,
                    f32 [steps, vocab]
Nothing is downloaded: weights are random (seeded), scaled so that the
activations stay O(1) through the layers.
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from gen_models import LlamaBlock, RMSNorm, rotate_half  # noqa: E402  (the test models' pieces)


class Layer(LlamaBlock):
    """gen_models' LLaMA block (RMSNorm, rotary attention, SwiGLU) with a KV
    cache, its rotary tables and mask given by the model (positions vary)."""

    def __init__(self, d, heads, ff):
        super().__init__(d, heads, ff, max_seq=1)

    def forward(self, x, cos, sin, past_k, past_v, mask):
        b, s, d = x.shape
        h = self.n1(x)
        q, k, v = (t(h).view(b, s, self.h, self.dh).transpose(1, 2) for t in (self.q, self.k, self.v))
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if past_k is not None:
            k, v = torch.cat((past_k, k), dim=2), torch.cat((past_v, v), dim=2)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        a = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, s, d)
        x = x + self.o(a)
        h = self.n2(x)
        g = self.gate(h)
        return x + self.down(g * torch.sigmoid(g) * self.up(h)), k, v


class Llama(nn.Module):
    def __init__(self, layers, d, heads, ff, vocab, max_seq):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Layer(d, heads, ff) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        dh = d // heads
        inv = 1.0 / (10000 ** (torch.arange(0, dh, 2).float() / dh))
        emb = torch.outer(torch.arange(max_seq).float(), inv).repeat(1, 2)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())
        self.register_buffer("causal", torch.ones(max_seq, max_seq, dtype=torch.bool).tril())

    def run(self, ids, cos, sin, cache, mask):
        x = self.embed(ids)
        present = []
        for i, layer in enumerate(self.layers):
            past_k, past_v = (cache[2 * i], cache[2 * i + 1]) if cache else (None, None)
            x, k, v = layer(x, cos, sin, past_k, past_v, mask)
            present += [k, v]
        return (self.head(self.norm(x)), *present)


class Prefill(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.m = model

    def forward(self, ids):
        s = ids.shape[1]
        return self.m.run(ids, self.m.cos[:s], self.m.sin[:s], None, self.m.causal[:s, :s])


class Decode(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.m = model

    def forward(self, ids, pos, *cache):
        return self.m.run(ids, self.m.cos[pos], self.m.sin[pos], list(cache), None)


class Decoder(nn.Module):
    """The prompt and the steps in one graph: seq new tokens after past cached
    ones (past 0: the prompt), at positions past.. with the causal mask."""

    def __init__(self, model):
        super().__init__()
        self.m = model

    def forward(self, ids, *cache):
        past, s = cache[0].shape[2], ids.shape[1]
        cos, sin = self.m.cos[past:past + s], self.m.sin[past:past + s]
        return self.m.run(ids, cos, sin, list(cache), self.m.causal[past:past + s, :past + s])


def export_decoder(model, a, past, present):
    """decoder.onnx and decoder_check/ (see the module's docstring)."""
    dh = a.d // a.heads
    cache = [torch.randn(1, a.heads, 3, dh) for _ in range(2 * a.layers)]
    torch.onnx.export(Decoder(model), (torch.tensor([[1, 2]]), *cache),
                      os.path.join(a.out, "decoder.onnx"), input_names=["ids", *past],
                      output_names=["logits", *present],
                      dynamic_axes={"ids": {1: "seq"}, "logits": {1: "seq"},
                                    **{n: {2: "past"} for n in past},
                                    **{n: {2: "past_plus_seq"} for n in present}},
                      opset_version=17, do_constant_folding=True)
    check = os.path.join(a.out, "decoder_check")
    os.makedirs(check, exist_ok=True)
    prompt = torch.randint(0, a.vocab, (1, max(a.prompt, 4)))
    _, *cache = Prefill(model)(prompt[:, :-3])
    logits, *_ = Decoder(model)(prompt[:, -3:], *cache)
    np.save(os.path.join(check, "ids.npy"), prompt[:, -3:].numpy())
    for name, rows in zip(past, cache):
        np.save(os.path.join(check, f"{name}.npy"), rows.numpy())
    np.save(os.path.join(check, "logits.npy"), logits.numpy())


def greedy(model, prompt, steps):
    """PyTorch's reference loop: the prompt, then one token at a time."""
    with torch.no_grad():
        logits, *cache = Prefill(model)(prompt)
        tokens, rows = [], [logits[0, -1]]
        for i in range(steps):
            tok = int(rows[-1].argmax())
            tokens.append(tok)
            pos = torch.tensor([prompt.shape[1] + i])
            logits, *cache = Decode(model)(torch.tensor([[tok]]), pos, *cache)
            rows.append(logits[0, -1])
    return np.array(tokens, dtype=np.int64), torch.stack(rows[:steps]).numpy()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--d", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ff", type=int, default=688)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--max-seq", type=int, default=2048)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    torch.manual_seed(a.seed)
    model = Llama(a.layers, a.d, a.heads, a.ff, a.vocab, a.max_seq).eval()
    for m in model.modules():  # scaled like a trained model's
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=1.0 / math.sqrt(m.in_features))
    os.makedirs(a.out, exist_ok=True)
    dh = a.d // a.heads
    kv = [f"{n}_{kind}_{i}" for n in ("past", "present") for i in range(a.layers) for kind in "kv"]
    past, present = kv[: 2 * a.layers], kv[2 * a.layers:]
    prompt = torch.randint(0, a.vocab, (1, a.prompt))
    with torch.no_grad():
        torch.onnx.export(Prefill(model), (prompt,), os.path.join(a.out, "prefill.onnx"),
                          input_names=["ids"], output_names=["logits", *present],
                          dynamic_axes={"ids": {1: "seq"}, "logits": {1: "seq"},
                                        **{n: {2: "seq"} for n in present}},
                          opset_version=17, do_constant_folding=True)
        cache = [torch.randn(1, a.heads, 3, dh) for _ in range(2 * a.layers)]
        torch.onnx.export(Decode(model), (torch.tensor([[1]]), torch.tensor([3]), *cache),
                          os.path.join(a.out, "decode.onnx"),
                          input_names=["ids", "pos", *past], output_names=["logits", *present],
                          dynamic_axes={**{n: {2: "past"} for n in past},
                                        **{n: {2: "past_plus_1"} for n in present}},
                          opset_version=17, do_constant_folding=True)
        export_decoder(model, a, past, present)
    tokens, logits = greedy(model, prompt, a.steps)
    np.save(os.path.join(a.out, "prompt.npy"), prompt.numpy())
    np.save(os.path.join(a.out, "torch_tokens.npy"), tokens)
    np.save(os.path.join(a.out, "torch_logits.npy"), logits)
    print(a.out)


if __name__ == "__main__":
    main()
