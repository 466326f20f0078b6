"""The zoo from Python: mlp and lenet trained on Fashion-MNIST from Python (oar.nn layers, the C loader
through oar.utils.data.IdxLoader, oar.optim.SGD) gives what `oar train --model <name>` gives for the
same seed: the same initial weights (the layers draw from the same generator in the same
order), the same batches, the same mean training loss, test loss and accuracy, and the same
final parameters. The front end adds no numerical difference. Skips without the data set or
the oar command."""
import json
import os
import subprocess
from collections import OrderedDict

import numpy as np
import pytest

import oar
import oar.nn as nn

from conftest import shared_dir

STEPS, MOMENTUM, SEED = 30, 0.9, 0


def fashion_files():
    d = "/usr/share/datasets/fashion-mnist"
    if os.path.exists(f"{d}/train-images-idx3-ubyte.gz"):
        return [f"{d}/{n}-idx{k}-ubyte.gz" for n, k in (("train-images", 3), ("train-labels", 1),
                                                          ("t10k-images", 3), ("t10k-labels", 1))]
    s = shared_dir()
    if s and os.path.exists(f"{s}/data/fashion-mnist/train-first20000-images-idx3-ubyte.gz"):
        base = f"{s}/data/fashion-mnist"
        return [f"{base}/train-first20000-images-idx3-ubyte.gz", f"{base}/train-first20000-labels-idx1-ubyte.gz",
                f"{base}/t10k-images-idx3-ubyte.gz", f"{base}/t10k-labels-idx1-ubyte.gz"]
    return None


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 512), nn.Linear(512, 512), nn.Linear(512, 10)

    def forward(self, x):
        x = oar.relu(self.fc1(x.flatten(1)))
        return self.fc3(oar.relu(self.fc2(x)))


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(1, 6, 5, padding=2), nn.Conv2d(6, 16, 5)
        self.f1, self.f2, self.f3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = nn.functional.max_pool2d(oar.relu(self.c1(x)), 2)
        x = nn.functional.max_pool2d(oar.relu(self.c2(x)), 2).flatten(1)
        return self.f3(oar.relu(self.f2(oar.relu(self.f1(x)))))


# each model with its recipe in `oar train` (tools/oar/train_recipe.c), under a constant schedule
RECIPES = [("mlp", MLP, 64, 0.05, 0.0), ("lenet", LeNet, 16, 0.02, 0.1)]


@pytest.mark.parametrize("name, build, batch, lr, smoothing", RECIPES, ids=[r[0] for r in RECIPES])
def test_zoo_model_matches_oar_train(tmp_path, name, build, batch, lr, smoothing):
    files, cli = fashion_files(), os.environ.get("OAR_CLI")
    if not files:
        pytest.skip("Fashion-MNIST is absent (/usr/share/datasets/fashion-mnist or ../shared/data)")
    if not cli or not os.path.exists(cli):
        pytest.skip("the oar command is unknown (CTest sets OAR_CLI)")
    r = subprocess.run([cli, "train", "--model", name, "--data", "fashion-mnist", "--steps", str(STEPS),
                        "--schedule", "constant", "--seed", str(SEED), "--workers", "0", "--quiet",
                        "--metrics", str(tmp_path / "m.jsonl"), "--checkpoint", str(tmp_path / "c.safetensors")],
                       capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    want = json.loads((tmp_path / "m.jsonl").read_text().splitlines()[0])
    final = oar.load(str(tmp_path / "c.safetensors"))

    oar.manual_seed(SEED)
    model = build()
    opt = oar.optim.SGD(model.parameters(), lr=lr, momentum=MOMENTUM)
    train = oar.utils.data.IdxLoader(files[0], files[1], batch, shuffle=True, drop_last=True, seed=SEED,
                                     mean=0.2860, std=0.3530)
    losses = []
    for x, y in train:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y, label_smoothing=smoothing)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if len(losses) == STEPS:
            break
    model.eval()
    test = oar.utils.data.IdxLoader(files[2], files[3], batch, mean=0.2860, std=0.3530)
    total = right = count = 0.0
    with oar.no_grad():
        for x, y in test:
            logits = model(x)
            total += nn.functional.cross_entropy(logits, y).item() * y.numel()
            right += (logits.argmax(-1) == y).sum().item()
            count += y.numel()
    assert np.mean(losses) == pytest.approx(want["train_loss"], abs=2e-6)  # the metrics file has 6 decimals
    assert total / count == pytest.approx(want["test_loss"], abs=2e-6)
    assert right / count == pytest.approx(want["test_accuracy"], abs=2e-6)
    for name, p in model.state_dict().items():
        np.testing.assert_allclose(p.numpy(), final["model." + name].numpy(), rtol=0, atol=1e-6, err_msg=name)
