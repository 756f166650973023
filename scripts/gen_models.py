#!/usr/bin/python3
"""Exports the test and benchmark models with PyTorch's ONNX exporter.

Each model is written as NAME.onnx with one input file per graph input
(NAME.in.INPUT.npy) and the exporter's own outputs (NAME.out.OUTPUT.npy),
computed by PyTorch in eval mode, so that fusetune's importer and reference
executor are checked against PyTorch itself.

Usage: gen_models.py OUT_DIR [--size small|large|example|e2e] [--only NAME,...]

--size e2e writes issue 9's end-to-end models (BERT-base layer, GPT-2 block,
LLaMA block and an MLP at sequence 384), bert_base_12layer (sequence 128),
which the compile-time lookup benchmark uses, bert_layer_s128 (one
BERT-base layer at sequence 128, issue 8's yardstick) and bert_layer_dynamic
(that layer with its sequence symbolic).
Needs Debian's python3-torch and python3-numpy (scripts/setup.sh installs them).
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)


class MLP(nn.Module):
    def __init__(self, d, hidden, layers):
        super().__init__()
        dims = [d] + [hidden] * layers
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def erf_gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def tanh_gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class SelfAttention(nn.Module):
    """BERT/GPT-style attention written out: projections, reshape/transpose, scaled scores."""

    def __init__(self, d, heads, causal, fused_qkv, max_seq):
        super().__init__()
        self.h, self.dh, self.causal, self.fused_qkv = heads, d // heads, causal, fused_qkv
        if fused_qkv:
            self.qkv = nn.Linear(d, 3 * d)
        else:
            self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.o = nn.Linear(d, d)
        if causal:
            self.register_buffer("mask", torch.tril(torch.ones(max_seq, max_seq, dtype=torch.bool)))

    def split_heads(self, t, b, s):
        return t.view(b, s, self.h, self.dh).transpose(1, 2)

    def forward(self, x):
        b, s, d = x.shape
        if self.fused_qkv:
            q, k, v = self.qkv(x).split(d, dim=2)
        else:
            q, k, v = self.q(x), self.k(x), self.v(x)
        q, k, v = (self.split_heads(t, b, s) for t in (q, k, v))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh)
        if self.causal:
            scores = scores.masked_fill(~self.mask[:s, :s], float("-inf"))
        p = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(p, v).transpose(1, 2).reshape(b, s, d)
        return self.o(ctx)


class PostLNEncoder(nn.Module):
    """A BERT encoder layer: attention, residual + LayerNorm, erf-GELU FFN, residual + LayerNorm."""

    def __init__(self, d, heads, ff, layers=1):
        super().__init__()
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            blk = nn.Module()
            blk.attn = SelfAttention(d, heads, causal=False, fused_qkv=False, max_seq=0)
            blk.ln1, blk.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            blk.fc1, blk.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)
            self.blocks.append(blk)

    def forward(self, x):
        for blk in self.blocks:
            x = blk.ln1(x + blk.attn(x))
            x = blk.ln2(x + blk.fc2(erf_gelu(blk.fc1(x))))
        return x


class PreLNDecoder(nn.Module):
    """A GPT-2 block: pre-LayerNorm, fused QKV, causal mask, tanh-GELU MLP."""

    def __init__(self, d, heads, ff, max_seq, layers=1):
        super().__init__()
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            blk = nn.Module()
            blk.ln1, blk.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            blk.attn = SelfAttention(d, heads, causal=True, fused_qkv=True, max_seq=max_seq)
            blk.fc1, blk.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)
            self.blocks.append(blk)

    def forward(self, x):
        for blk in self.blocks:
            x = x + blk.attn(blk.ln1(x))
            x = x + blk.fc2(tanh_gelu(blk.fc1(blk.ln2(x))))
        return x


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(1.0 + 0.1 * torch.randn(d)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaBlock(nn.Module):
    """A LLaMA block: RMSNorm written out, rotary embeddings, causal attention, SwiGLU."""

    def __init__(self, d, heads, ff, max_seq):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.gate, self.up = nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, self.dh, 2).float() / self.dh))
        t = torch.arange(max_seq).float()
        freqs = torch.outer(t, inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())
        self.register_buffer("mask", torch.tril(torch.ones(max_seq, max_seq, dtype=torch.bool)))

    def forward(self, x):
        b, s, d = x.shape
        h = self.n1(x)
        q, k, v = (t(h).view(b, s, self.h, self.dh).transpose(1, 2) for t in (self.q, self.k, self.v))
        cos, sin = self.cos[:s], self.sin[:s]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh)
        scores = scores.masked_fill(~self.mask[:s, :s], float("-inf"))
        a = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, s, d)
        x = x + self.o(a)
        h = self.n2(x)
        g = self.gate(h)
        return x + self.down(g * torch.sigmoid(g) * self.up(h))


class SmallCnn(nn.Module):
    """The CNN example: a stem Conv -> BN -> ReLU, a ResNet basic block, a
    MobileNetV2 inverted residual (1x1 expand, 3x3 depthwise, 1x1 project,
    ReLU6), global average pooling and a classifier. Exported with its
    BatchNormalization nodes kept (fusetune folds them into the convs)."""

    def __init__(self, classes=10):
        super().__init__()
        def cbr(cin, cout, k, s=1, groups=1, act=nn.ReLU):
            return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False),
                                 nn.BatchNorm2d(cout), act())
        self.stem = cbr(3, 16, 3, 2)
        self.block1, self.block2 = cbr(16, 16, 3), nn.Sequential(
            nn.Conv2d(16, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16))
        self.expand = cbr(16, 64, 1, act=nn.ReLU6)
        self.depthwise = cbr(64, 64, 3, 2, groups=64, act=nn.ReLU6)
        self.project = nn.Sequential(nn.Conv2d(64, 24, 1, bias=False), nn.BatchNorm2d(24))
        self.head = nn.Linear(24, classes)
        for bn in self.modules():  # non-trivial running statistics, so folding matters
            if isinstance(bn, nn.BatchNorm2d):
                bn.running_mean.uniform_(-0.5, 0.5)
                bn.running_var.uniform_(0.5, 2.0)
                bn.weight.data.uniform_(0.5, 1.5)
                bn.bias.data.uniform_(-0.2, 0.2)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(x + self.block2(self.block1(x)))
        x = self.project(self.depthwise(self.expand(x)))
        return self.head(x.mean(dim=(2, 3)))


class SmallCNN(nn.Module):
    """Conv+BN+ReLU, depthwise Conv(bias)+BN+ReLU6, pointwise Conv+BN+ReLU, pool, Linear."""

    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.c2, self.b2 = nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.BatchNorm2d(8)
        self.c3, self.b3 = nn.Conv2d(8, 16, 1), nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 10)
        with torch.no_grad():  # statistics as after training, not the identity
            for bn in (self.b1, self.b2, self.b3):
                bn.running_mean.uniform_(-0.5, 0.5)
                bn.running_var.uniform_(0.5, 2.0)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.2, 0.2)

    def forward(self, x):
        x = torch.relu(self.b1(self.c1(x)))
        x = torch.clamp(self.b2(self.c2(x)), 0, 6)
        x = torch.relu(self.b3(self.c3(x)))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


# Exported with training=PRESERVE: the eval-mode model keeps its
# BatchNormalization nodes (the default EVAL export folds them into the Convs).
KEEP_BATCHNORM = {"cnn_bn_op13", "cnn_small"}


class CachedAttention(nn.Module):
    """A decoder's attention with its KV cache as inputs and outputs: seq new
    rows after past cached ones, one graph for the prompt (past 0) and the
    steps after it (no mask: a test of shapes, not of a language model)."""

    def __init__(self, d, heads):
        super().__init__()
        self.qkv, self.out, self.heads = nn.Linear(d, 3 * d), nn.Linear(d, d), heads

    def forward(self, x, past_k, past_v):
        b, s, d = x.shape
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)
                   for t in self.qkv(x).split(d, dim=-1))
        k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // self.heads), dim=-1)
        return self.out((p @ v).transpose(1, 2).reshape(b, s, d)), k, v


def models(size):
    if size == "example":
        # The bundled example (examples/): a 2-layer BERT-style encoder, d=64, seq 32.
        torch.manual_seed(1)
        yield "encoder_small", PostLNEncoder(64, 4, 256, layers=2), [(1, 32, 64)], 13, None
        torch.manual_seed(2)
        yield "cnn_small", SmallCnn(), [(1, 3, 64, 64)], 17, None
        return
    if size == "e2e":
        # Each model seeded by itself: the same weights whichever others are
        # built or exported around it (torch_bench.py rebuilds one alone to
        # check PyTorch eager's output against the export's).
        s = 384
        e2e = [
            ("bert_layer", lambda: PostLNEncoder(768, 12, 3072), (1, s, 768)),
            ("gpt2_block", lambda: PreLNDecoder(768, 12, 3072, max_seq=s), (1, s, 768)),
            ("llama_block", lambda: LlamaBlock(1024, 16, 2816, max_seq=s), (1, s, 1024)),
            ("mlp_e2e", lambda: MLP(768, 3072, 3), (s, 768)),
            ("bert_base_12layer", lambda: PostLNEncoder(768, 12, 3072, layers=12), (1, 128, 768)),
            # Issue 8's yardstick: one BERT-base layer at sequence 128.
            ("bert_layer_s128", lambda: PostLNEncoder(768, 12, 3072), (1, 128, 768)),
            # The same layer with its sequence symbolic, as exported for serving
            # (issue 39's shape buckets: bench/decode/run_buckets.sh MODEL=bert).
            ("bert_layer_dynamic", lambda: PostLNEncoder(768, 12, 3072), (1, 128, 768),
             {"x": {1: "seq"}, "y": {1: "seq"}}),
        ]
        for seed, (name, build, shape, *dynamic) in enumerate(e2e, start=100):
            torch.manual_seed(seed)
            yield name, build(), [shape], 17, dynamic[0] if dynamic else None
        return
    small = size == "small"
    b, s = (2, 8) if small else (1, 128)
    d, heads, ff = (32, 4, 64) if small else (768, 12, 3072)
    ll_d, ll_ff = (32, 88) if small else (1024, 2816)
    yield "mlp", MLP(d, 2 * d, 3), [(b * s, d)], 13, None
    yield "encoder_postln_op13", PostLNEncoder(d, heads, ff), [(b, s, d)], 13, None
    yield "encoder_postln_op17", PostLNEncoder(d, heads, ff), [(b, s, d)], 17, None
    yield "encoder_3layer_op13", PostLNEncoder(d, heads, ff, layers=3), [(b, s, d)], 13, None
    yield "decoder_preln_op14", PreLNDecoder(d, heads, ff, max_seq=max(s, 16)), [(b, s, d)], 14, None
    yield "decoder_preln_op17", PreLNDecoder(d, heads, ff, max_seq=max(s, 16)), [(b, s, d)], 17, None
    if small:
        # Layer shifts (fusion_space/layer_shift.h) on a pre-LN stack.
        yield "decoder_3layer_op17", PreLNDecoder(d, heads, ff, max_seq=16, layers=3), [(b, s, d)], 17, None
    yield "llama_op17", LlamaBlock(ll_d, 4 if small else 16, ll_ff, max_seq=max(s, 16)), [(b, s, ll_d)], 17, None
    if small:
        # Symbolic batch and sequence dimensions, as exported for serving.
        yield "encoder_dynamic_op17", PostLNEncoder(d, heads, ff), [(b, s, d)], 17, {
            "x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}
        # A KV cache as inputs and outputs, `seq` and `past` symbolic (past 0: the prompt).
        yield "attention_cache_op17", CachedAttention(d, heads), [(1, 3, d), (1, heads, 5, d // heads),
                                                                  (1, heads, 5, d // heads)], 17, {
            "x0": {1: "seq"}, "x1": {2: "past"}, "x2": {2: "past"}, "y": {1: "seq"}}
        # One CNN exported with its BatchNormalization nodes and with them
        # folded by the exporter: fusetune's passes should make them alike.
        cnn = SmallCNN()
        yield "cnn_bn_op13", cnn, [(1, 3, 8, 8)], 13, None
        yield "cnn_folded_op13", cnn, [(1, 3, 8, 8)], 13, None


def export(name, model, shapes, opset, dynamic_axes, out_dir):
    model.eval()
    inputs = tuple(torch.randn(*shape) for shape in shapes)
    names = ["x"] if len(inputs) == 1 else [f"x{i}" for i in range(len(inputs))]
    path = os.path.join(out_dir, name + ".onnx")
    with torch.no_grad():
        outputs = model(*inputs)
        if isinstance(outputs, tuple):  # a KV cache's presents follow y
            outputs = outputs[0]
        training = torch.onnx.TrainingMode.PRESERVE if name in KEEP_BATCHNORM else torch.onnx.TrainingMode.EVAL
        torch.onnx.export(model, inputs, path, opset_version=opset, input_names=names, output_names=["y"],
                          dynamic_axes=dynamic_axes, do_constant_folding=True, training=training)
    for n, t in zip(names, inputs):
        np.save(os.path.join(out_dir, f"{name}.in.{n}.npy"), t.numpy())
    np.save(os.path.join(out_dir, f"{name}.out.y.npy"), outputs.numpy())


def save_external(src, dst_name, out_dir):
    """Re-saves an exported model with its weights in an external data file (needs python3-onnx)."""
    import onnx
    model = onnx.load(os.path.join(out_dir, src + ".onnx"))
    onnx.save_model(model, os.path.join(out_dir, dst_name + ".onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location=dst_name + ".weights", size_threshold=64)
    for kind in ("in.x", "out.y"):
        data = np.load(os.path.join(out_dir, f"{src}.{kind}.npy"))
        np.save(os.path.join(out_dir, f"{dst_name}.{kind}.npy"), data)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--size", choices=["small", "large", "example", "e2e"], default="small")
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    torch.set_num_threads(2)
    only = set(filter(None, args.only.split(",")))
    for name, model, shapes, opset, dyn in models(args.size):
        if only and name not in only:
            continue
        export(name, model, shapes, opset, dyn, args.out_dir)
        print(f"exported {name} (opset {opset})", file=sys.stderr)
    if args.size == "small" and (not only or "encoder_postln_op17" in only):
        save_external("encoder_postln_op17", "encoder_external_op17", args.out_dir)


if __name__ == "__main__":
    main()
