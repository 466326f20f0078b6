"""Shared by test_torchvision.py and test_torchaudio.py: torch runs a model file's models, the same
files run on oar in another interpreter (model_files_oar_side.py, under the torch switch), and
each output and parameter gradient must agree."""
import os
import pickle
import subprocess
import sys

import numpy as np

RTOL, ATOL = 2e-3, 1e-5  # fp32 through 20-120 layers: |oar - torch| <= RTOL * max|torch| + ATOL per tensor


def close(a, b, what):
    assert a.shape == b.shape, f"{what}: shape {a.shape} vs torch {b.shape}"
    scale = max(float(np.abs(b).max()), 1e-6)
    err = float(np.abs(a - b).max())
    assert err <= RTOL * scale + ATOL, f"{what}: max |oar - torch| = {err:.3g}, torch's max |value| = {scale:.3g}"


def torch_side(torch, model, xs, call_kwargs):
    """Runs model on xs in torch with a random output gradient: (request entry parts, expected). A model
    without parameters (an audio transform) is differentiated with respect to its float inputs
    instead ('input0', ...)."""
    by_input = not any(p.requires_grad for p in model.parameters())
    if by_input:
        xs = [x.detach().requires_grad_() if x.is_floating_point() else x for x in xs]
    y = model(*xs, **call_kwargs)
    y = y[-1] if isinstance(y, list) else y[0] if isinstance(y, tuple) else y
    gy = torch.randn_like(y)
    y.backward(gy)
    sd = {key: v.detach().numpy().copy() for key, v in model.state_dict().items()}
    grads = {key: p.grad.numpy().copy() for key, p in model.named_parameters() if p.grad is not None}
    if by_input:
        grads.update({f"input{i}": x.grad.numpy().copy() for i, x in enumerate(xs) if x.grad is not None})
    want = {"y": y.detach().numpy(), "grads": grads}
    return sd, [x.detach().numpy() for x in xs], gy.numpy(), want


def run_oar_side(req, folder):
    with open(folder / "req.pkl", "wb") as f:
        pickle.dump(req, f)
    side = os.path.join(os.path.dirname(__file__), "model_files_oar_side.py")
    env = dict(os.environ, OAR_NUM_THREADS="1")
    env.pop("OAR_MOCK_TORCH", None)
    r = subprocess.run([sys.executable, side, str(folder / "req.pkl"), str(folder / "res.pkl")], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"oar side failed:\n{r.stdout}\n{r.stderr[-4000:]}"
    with open(folder / "res.pkl", "rb") as f:
        return pickle.load(f)


def check_model(name, want, res):
    assert "error" not in res, f"{name} on oar: {res.get('error')}"
    close(res["y"], want["y"], f"{name} output")
    assert set(res["grads"]) == set(want["grads"]), f"{name}: parameters with gradients differ"
    # a gradient that is zero in exact arithmetic (raft: a conv bias feeding an InstanceNorm, which removes
    # it) is fp32 noise in both: below 1e-6 of the model's largest gradient, oar's must be noise too
    noise = 1e-6 * max(float(np.abs(g).max()) for g in want["grads"].values())
    for key, g in want["grads"].items():
        if float(np.abs(g).max()) < noise:
            got_max = float(np.abs(res["grads"][key]).max())
            assert got_max < noise, f"{name} grad {key}: torch's is noise (< {noise:.3g}), oar's max is {got_max:.3g}"
        else:
            close(res["grads"][key], g, f"{name} grad {key}")
