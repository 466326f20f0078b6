"""The oar half of test_torchvision.py and test_torchaudio.py, run in its own interpreter so that
`import torch` inside the model files resolves to oar for good (the test's own process keeps the
real torch as oracle).

    python model_files_oar_side.py REQUEST.pkl RESULT.pkl

A model name is a torchvision.models builder ('resnet18', 'video.r3d_18') or 'module:builder'
('torchaudio.models:Conformer', 'torchaudio.transforms:MelSpectrogram'); a model without
parameters is differentiated with respect to its float inputs. A model returning a list gives its last element (raft's flows),
a tuple its first (the audio models' (output, lengths)).

REQUEST: {"models": [(name, kwargs, state_dict, inputs, call_kwargs, grad_y, double)], "train": None or {name, kwargs,
state_dict, batches: [(x, y)], lr, momentum}} (numpy arrays). RESULT: per model the output and
every parameter's gradient; for training, one f32 step's loss and parameters, and the f64 eager
and compiled loss curves and final parameters."""
import importlib
import pickle
import sys
import warnings

import numpy as np

import oar

oar.mock_torch()
warnings.filterwarnings("ignore", message="Failed to load image Python extension")
import torch  # noqa: E402  (oar, through the switch)
import torch.nn.functional as F  # noqa: E402


def builder(name):
    if ":" in name:
        module, attr = name.split(":")
        return getattr(importlib.import_module(module), attr)
    model = importlib.import_module("torchvision").models
    for part in name.split("."):  # 'video.r3d_18': a builder in a submodule
        model = getattr(model, part)
    return model


def build(name, kwargs, state_dict, double=False):
    model = builder(name)(**kwargs)
    if double:
        model = model.double()
    model.load_state_dict({k: torch.from_numpy(np.array(v, order="C")) for k, v in state_dict.items()})
    return model


def forward_backward(name, kwargs, state_dict, xs, call_kwargs, gy, double):
    model = build(name, kwargs, state_dict, double).eval()
    inputs = [torch.from_numpy(x) for x in xs]
    by_input = not any(p.requires_grad for p in model.parameters())  # a transform: the inputs' gradients
    if by_input:
        for x in inputs:
            if x.is_floating_point():
                x.requires_grad_()
    y = model(*inputs, **call_kwargs)
    y = y[-1] if isinstance(y, list) else y[0] if isinstance(y, tuple) else y
    y.backward(torch.from_numpy(gy))
    grads = {k: p.grad.numpy().copy() for k, p in model.named_parameters() if p.grad is not None}
    if by_input:
        grads.update({f"input{i}": x.grad.numpy().copy() for i, x in enumerate(inputs) if x.grad is not None})
    return {"y": y.detach().numpy().copy(), "grads": grads}


def train(req, compiled, double, steps):
    model = build(req["name"], req["kwargs"], req["state_dict"]).train()
    if double:
        model = model.double()
    opt = torch.optim.SGD(model.parameters(), lr=req["lr"], momentum=req["momentum"])

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    run = oar.jit.to_static(step) if compiled else step
    losses = [float(run(torch.from_numpy(x.astype(np.float64) if double else x), torch.from_numpy(y)).item())
              for x, y in req["batches"][:steps]]
    params = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    return losses, params


def main(request_path, result_path):
    with open(request_path, "rb") as f:
        req = pickle.load(f)
    result = {"models": {}}
    for name, kwargs, sd, xs, call_kwargs, gy, double in req["models"]:
        try:
            result["models"][name] = forward_backward(name, kwargs, sd, xs, call_kwargs, gy, double)
        except Exception as e:  # reported per model by the test
            result["models"][name] = {"error": f"{type(e).__name__}: {e}"}
    if req.get("train"):
        result["f32_losses"], result["f32_params"] = train(req["train"], compiled=False, double=False, steps=1)
        for mode in ("eager", "compiled"):
            result[f"{mode}_losses"], result[f"{mode}_params"] = train(req["train"], compiled=mode == "compiled",
                                                                       double=True, steps=len(req["train"]["batches"]))
    with open(result_path, "wb") as f:
        pickle.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
