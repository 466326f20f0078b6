#!/usr/bin/env python3
"""Convergence parity with PyTorch: trains the reference mlp and lenet (definitions as in
../shared/bench/torch_workloads.py) for 200 SGD steps (lr 0.01, momentum 0.9, batch 64) on the
first Fashion-MNIST training images in order, from initial weights that both sides compute
from the same integer hash, and writes the loss of every step to tests/golden/parity.txt.

Run with Debian's python3-torch:  /usr/bin/python3 tests/golden/gen_parity.py [SHARED_DIR]
test_parity.c repeats the training in oar and compares the curves.
"""
import gzip
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

STEPS, BATCH, LR, MOMENTUM = 200, 64, 0.01, 0.9
MEAN, STD = 0.2860, 0.3530


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 512), nn.Linear(512, 512), nn.Linear(512, 10)

    def forward(self, x):
        x = x.flatten(1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(1, 6, 5, padding=2), nn.Conv2d(6, 16, 5)
        self.f1, self.f2, self.f3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.f3(F.relu(self.f2(F.relu(self.f1(x.flatten(1))))))


def hashed_uniform(k, n):
    """u in [0, 1) for elements 0..n-1 of parameter k: a 32-bit integer mix, the same in C."""
    m = 0xFFFFFFFF
    x = (np.arange(n, dtype=np.uint64) + np.uint64(k) * np.uint64(0x9E3779B9) + np.uint64(1)) & np.uint64(m)
    x ^= x >> np.uint64(16)
    x = (x * np.uint64(0x7FEB352D)) & np.uint64(m)
    x ^= x >> np.uint64(15)
    x = (x * np.uint64(0x846CA68B)) & np.uint64(m)
    x ^= x >> np.uint64(16)
    return x.astype(np.float64) / 4294967296.0


def init(model):
    for k, (name, p) in enumerate(model.named_parameters()):
        bound = 1.0 / np.sqrt(p.numel() / p.shape[0]) if p.dim() >= 2 else 0.05
        w = (2.0 * hashed_uniform(k, p.numel()) - 1.0) * bound
        with torch.no_grad():
            p.copy_(torch.from_numpy(w.astype(np.float32)).reshape(p.shape))


def main():
    shared = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../../shared")
    fm = os.path.join(shared, "data/fashion-mnist")
    img = np.frombuffer(gzip.open(os.path.join(fm, "train-first20000-images-idx3-ubyte.gz")).read(), np.uint8, offset=16)
    lab = np.frombuffer(gzip.open(os.path.join(fm, "train-first20000-labels-idx1-ubyte.gz")).read(), np.uint8, offset=8)
    n = STEPS * BATCH
    x = img[: n * 784].reshape(n, 1, 28, 28).astype(np.float32) / np.float32(255)
    x = (x - np.float32(MEAN)) / np.float32(STD)
    y = lab[:n].astype(np.int64)
    torch.set_num_threads(1)
    lines = [f"# oar convergence parity from torch {torch.__version__}: {STEPS} SGD steps, lr {LR}, momentum "
             f"{MOMENTUM}, batch {BATCH}; regenerate with gen_parity.py"]
    for name, cls in (("mlp", MLP), ("lenet", LeNet)):
        model = cls()
        init(model)
        names = " ".join(n for n, _ in model.named_parameters())
        opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
        losses = []
        for s in range(STEPS):
            xb = torch.from_numpy(x[s * BATCH:(s + 1) * BATCH])
            yb = torch.from_numpy(y[s * BATCH:(s + 1) * BATCH])
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        lines.append(f"params {name} {names}")
        lines.append(f"losses {name} " + " ".join(repr(v) for v in losses))
        print(f"{name}: loss {losses[0]:.4f} -> {losses[-1]:.4f}", file=sys.stderr)
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "parity.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
