"""Exports real models with PyTorch to ONNX, with an input and PyTorch's output for each, for
tests/onnx/real_models.sh (and bench/onnx_vs_ort.py). Run with Debian's python3 (torch 1.13,
torchvision 0.14). Random weights (seeded): no download.

usage: torch_models.py OUT_DIR [--batch N] [--models a,b,...]
writes OUT_DIR/<model>.onnx, <model>.x.npy (input), <model>.y.npy (torch's output)."""
import argparse
import os
import sys

import numpy as np
import torch
import torchvision


class TransformerClassifier(torch.nn.Module):
    """Token embedding + positional embedding + 2-layer TransformerEncoder + mean pool + linear."""

    def __init__(self, vocab=100, d=32, heads=4, layers=2, classes=5, length=16):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Parameter(torch.randn(1, length, d) * 0.1)
        layer = torch.nn.TransformerEncoderLayer(d, heads, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(d, classes)

    def forward(self, tokens):
        h = self.enc(self.tok(tokens) + self.pos)
        return self.head(h.mean(dim=1))


class LSTMClassifier(torch.nn.Module):
    """2-layer LSTM over a sequence of feature vectors, the last step's state classified."""

    def __init__(self, features=8, hidden=16, classes=4):
        super().__init__()
        self.lstm = torch.nn.LSTM(features, hidden, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(hidden, classes)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.head(y[:, -1])


def randomize_batch_norms(model, g):
    """Fresh torchvision models have identity batch norms; give them statistics, as trained ones
    have, so the import (and oar's conv + batch-norm folding) is checked on real arithmetic."""
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(c, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(c, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(c, generator=g) * 0.1)
    return model


def build(name, batch):
    g = torch.Generator().manual_seed(0)
    model, x = build_plain(name, batch, g)
    return randomize_batch_norms(model, g), x


def build_plain(name, batch, g):
    if name == "resnet18":
        return torchvision.models.resnet18(weights=None), torch.randn(batch, 3, 224, 224, generator=g)
    if name == "mobilenet_v2":
        return torchvision.models.mobilenet_v2(weights=None), torch.randn(batch, 3, 224, 224, generator=g)
    if name == "squeezenet1_1":
        return torchvision.models.squeezenet1_1(weights=None), torch.randn(batch, 3, 224, 224, generator=g)
    if name == "transformer":
        return TransformerClassifier(), torch.randint(0, 100, (batch, 16), generator=g)
    if name == "lstm":
        return LSTMClassifier(), torch.randn(batch, 12, 8, generator=g)
    if name == "pool_indices":
        return PoolIndices(), torch.randn(batch, 3, 16, 12, generator=g)
    if name in ZOO:
        return zoo_model(name), torch.randn(batch, 3, ZOO[name], ZOO[name], generator=g)
    raise SystemExit("unknown model " + name)


class PoolIndices(torch.nn.Module):
    """max_pool2d(return_indices=True) (SegNet's encoder): torch exports MaxPool's Indices output and
    a second MaxPool to subtract each plane's offset; values and indices in one float output."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.pool = torch.nn.MaxPool2d(3, 2, 1, return_indices=True)

    def forward(self, x):
        y, i = self.pool(torch.relu(self.conv(x)))
        return torch.cat([y.flatten(1), i.flatten(1).float()], 1)


class SegmentationOut(torch.nn.Module):
    """A torchvision segmentation model's "out" map (the models return a dict)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def zoo_model(name):
    if hasattr(torchvision.models.segmentation, name):
        return SegmentationOut(getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None))
    return getattr(torchvision.models, name)(weights=None)


MODELS = ["resnet18", "mobilenet_v2", "squeezenet1_1", "transformer", "lstm"]
# More architectures, each for what it exports (input sizes kept small for the test's time):
# squeeze-excite + SiLU, HardSwish/HardSigmoid, channel shuffle, grouped convs, depthwise 7x7 +
# LayerNorm + GELU, shifted-window attention (roll, masks), dense concats, inception branches,
# a segmentation head with bilinear Resize.
ZOO = {"efficientnet_b0": 128, "mobilenet_v3_small": 128, "shufflenet_v2_x0_5": 128, "regnet_y_400mf": 128,
       "convnext_tiny": 128, "swin_t": 224, "densenet121": 128, "googlenet": 128, "lraspp_mobilenet_v3_large": 128}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--models", default=",".join(MODELS))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    for name in a.models.split(","):
        model, x = build(name, a.batch)
        model.eval()
        with torch.no_grad():
            y = model(x)
        path = os.path.join(a.out, name + ".onnx")
        torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, opset_version=17)
        np.save(os.path.join(a.out, name + ".x.npy"), x.numpy())
        np.save(os.path.join(a.out, name + ".y.npy"), y.numpy())
        print("exported", name, tuple(x.shape), "->", tuple(y.shape), file=sys.stderr)


if __name__ == "__main__":
    main()
