#!/usr/bin/python3
"""cnn_models.py OUT_DIR [--only NAME,...]: issue 37's end-to-end CNNs,
torchvision ResNet-18, ResNet-50 and MobileNetV2 at 1x3x224x224 (random
weights: nothing is downloaded), exported at opset 17 two ways:

  NAME.onnx     BatchNormalization folded into the convolutions by the
                exporter (its default eval-mode export); checked to hold no
                BatchNormalization node
  NAME_bn.onnx  the BatchNormalization nodes kept (TrainingMode.PRESERVE of a
                model in eval mode skips the exporter's Conv+BN fusion);
                checked to hold one per BatchNorm2d

Beside them: NAME.pt (the state dict, so that torch_bench.py runs the very
same weights), NAME.in.x.npy (the seeded input) and NAME.out.y.npy (PyTorch's
output in eval mode), the last two also as NAME_bn.*, the names
run_cnn_e2e.sh, ort_bench.js and assemble.py look for.

The BatchNorm layers' running statistics are not left at mean 0, variance 1:
they are the statistics of the network's own activations on random inputs
(train-mode passes with a cumulative average), and their affine weights are
random too, so folding them changes every convolution's weights and bias
while the activations keep their scale through 50 layers.
Needs Debian's python3-torch, python3-torchvision and python3-onnx.
"""
import argparse
import collections
import os
import sys

import numpy as np
import onnx
import torch
import torchvision

ARCHS = ("resnet18", "resnet50", "mobilenet_v2")
SHAPE = (1, 3, 224, 224)


def build(arch):
    """The architecture with torchvision's random initialisation (seeded),
    not yet given its BatchNorm statistics."""
    torch.manual_seed(0)
    return getattr(torchvision.models, arch)(weights=None)


def set_batchnorm_stats(model, seed):
    """Running statistics measured on random inputs and random affine
    parameters for every BatchNorm2d (see the module's docstring)."""
    g = torch.Generator().manual_seed(seed)
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average over the passes below
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(4, *SHAPE[1:], generator=g))
        for bn in bns:
            bn.weight.copy_(0.5 + torch.rand(bn.weight.shape, generator=g))
            bn.bias.copy_(0.2 * torch.randn(bn.bias.shape, generator=g))
    for bn in bns:
        bn.momentum = 0.1  # torchvision's, so that the export's attribute is the usual one
    model.eval()
    return len(bns)


def load(arch, out_dir):
    """The exported model's module with its weights, for torch_bench.py."""
    model = build(arch)
    model.load_state_dict(torch.load(os.path.join(out_dir, f"{arch}.pt")))
    return model.eval()


def op_counts(path):
    return collections.Counter(n.op_type for n in onnx.load(path, load_external_data=False).graph.node)


def export(model, x, path, keep_bn):
    kwargs = {"training": torch.onnx.TrainingMode.PRESERVE} if keep_bn else {}
    torch.onnx.export(model, (x,), path, opset_version=17, input_names=["x"], output_names=["y"],
                      **kwargs)


def write_model(arch, out_dir):
    model = build(arch)
    num_bn = set_batchnorm_stats(model, seed=1)
    torch.save(model.state_dict(), os.path.join(out_dir, f"{arch}.pt"))
    x = torch.randn(SHAPE, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        y = model(x)
    for name, keep_bn in ((arch, False), (f"{arch}_bn", True)):
        path = os.path.join(out_dir, f"{name}.onnx")
        export(model, x, path, keep_bn)
        if model.training:
            sys.exit(f"cnn_models: exporting {name} left the model in train mode")
        counts = op_counts(path)
        want_bn = num_bn if keep_bn else 0
        if counts["BatchNormalization"] != want_bn:
            sys.exit(f"cnn_models: {name} has {counts['BatchNormalization']} BatchNormalization "
                     f"nodes, expected {want_bn}")
        np.save(os.path.join(out_dir, f"{name}.in.x.npy"), x.numpy())
        np.save(os.path.join(out_dir, f"{name}.out.y.npy"), y.numpy())
        print(f"{name}: {sum(counts.values())} nodes ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})",
              file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--only", default="", help="comma-separated subset of " + ",".join(ARCHS))
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    # Model names with the _bn suffix select their architecture.
    wanted = {n.removesuffix("_bn") for n in args.only.split(",") if n} or set(ARCHS)
    unknown = wanted - set(ARCHS)
    if unknown:
        sys.exit(f"cnn_models: unknown models {sorted(unknown)}; known: {', '.join(ARCHS)}")
    torch.set_num_threads(2)
    for arch in ARCHS:
        if arch in wanted:
            write_model(arch, args.out_dir)


if __name__ == "__main__":
    main()
