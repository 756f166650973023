"""Exports the ONNX seed corpus of the onnx_import harness: the model families of
scripts/gen_models.py at tiny sizes (a few KB each), so libFuzzer mutates
structure rather than weights. Usage: make_onnx_seeds.py OUT_DIR (needs torch)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import torch  # noqa: E402
import gen_models as g  # noqa: E402


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(1)
    d, heads, ff = 8, 2, 16
    seeds = [
        ("mlp", g.MLP(d, 2 * d, 2), [(4, d)], 13, None),
        ("encoder_op13", g.PostLNEncoder(d, heads, ff), [(1, 4, d)], 13, None),
        ("decoder_op17", g.PreLNDecoder(d, heads, ff, max_seq=4), [(1, 4, d)], 17, None),
        ("llama_op17", g.LlamaBlock(d, heads, ff, max_seq=4), [(1, 4, d)], 17, None),
        ("encoder_dynamic_op17", g.PostLNEncoder(d, heads, ff), [(1, 4, d)], 17,
         {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}),
    ]
    for name, model, shapes, opset, dyn in seeds:
        g.export(name, model, shapes, opset, dyn, out)
        for f in os.listdir(out):
            if f.endswith(".npy"):
                os.remove(os.path.join(out, f))


if __name__ == "__main__":
    main()
