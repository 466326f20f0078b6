"""GPU tensors from Python, checked on a machine with a GPU: a small model's forward, backward and
SGD steps on 'cuda' against the same model on 'cpu' (same weights, same batch), device moves
in both directions with gradients flowing back across them, the factories' device=, printing,
and what has no CUDA kernel failing with a message. numpy only (no pytest, no torch), so
tests/cuda/run_on_device.sh runs it as a script; test_devices.py imports it and skips it where
oar.cuda.is_available() is False.

    PYTHONPATH=build-gpu/python python3 python/tests/gpu_check.py   # exit 0: all passed; 77: no GPU
"""
import sys

import numpy as np

import oar
import oar.nn as nn
import oar.nn.functional as F


def _close(a, b, what, rtol=1e-4, atol=1e-5):
    a = a.detach().cpu().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().cpu().numpy() if hasattr(b, "detach") else np.asarray(b)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=what)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(x.flatten(1))


def check_model_matches_cpu(steps=3):
    """forward, every parameter gradient, running statistics and SGD-momentum steps: cuda == cpu"""
    oar.manual_seed(0)
    cpu = Net()
    gpu = Net()
    gpu.load_state_dict(cpu.state_dict())
    weight = gpu.conv.weight
    assert gpu.cuda() is gpu and gpu.conv.weight is weight, "Module.cuda keeps the Parameter objects"
    assert all(p.is_cuda for p in gpu.parameters()) and gpu.bn.running_mean.is_cuda
    opts = [oar.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in (cpu, gpu)]
    R = np.random.RandomState(0)
    for step in range(steps):
        x = R.randn(4, 3, 8, 8).astype(np.float32)
        y = R.randint(0, 10, 4)
        losses = []
        for m, opt, dev in ((cpu, opts[0], "cpu"), (gpu, opts[1], "cuda")):
            xi = oar.tensor(x, device=dev)
            yi = oar.tensor(y, device=dev)
            assert xi.device.type == dev and (dev == "cpu" or xi.device == oar.device("cuda:0"))
            opt.zero_grad()
            loss = F.cross_entropy(m(xi), yi)
            loss.backward()
            losses.append(loss)
        _close(losses[1], losses[0], f"step {step}: loss")
        for (name, p), q in zip(cpu.named_parameters(), gpu.parameters()):
            assert q.grad.is_cuda, f"{name}'s gradient is on the GPU"
            _close(q.grad, p.grad, f"step {step}: gradient of {name}", rtol=1e-3, atol=1e-5)
        for o in opts:
            o.step()
        for (name, p), q in zip(cpu.named_parameters(), gpu.parameters()):
            _close(q, p, f"step {step}: {name} after the update", rtol=1e-3, atol=1e-5)
    _close(gpu.bn.running_var, cpu.bn.running_var, "running variance")
    back = gpu.cpu()
    assert not back.conv.weight.is_cuda and back.conv.weight is weight
    return float(losses[0].item())


def check_moves_and_factories():
    a = oar.randn(3, 4, requires_grad=True)
    b = a.to("cuda")  # differentiable: the gradient comes back to the host leaf
    assert b.is_cuda and b.device == oar.device("cuda:0") and b.get_device() == 0 and not a.is_cuda
    (b * b).sum().backward()
    _close(a.grad, 2 * a, "gradient through .to('cuda')")
    assert a.cuda().is_cuda and a.to(oar.device("cuda", 0)).is_cuda and a.to(0).is_cuda
    c = b.to("cuda")
    assert c is b, ".to of the device a tensor is on returns it"
    d = b.to("cpu", oar.float64)
    assert not d.is_cuda and d.dtype == oar.float64
    for f in (oar.zeros, oar.ones, oar.empty, oar.rand, oar.randn):
        assert f(2, 3, device="cuda").is_cuda, f.__name__
    assert oar.full((2,), 1.5, device="cuda").is_cuda and oar.arange(5, device="cuda").is_cuda
    assert oar.eye(3, device="cuda").is_cuda and oar.linspace(0, 1, 5, device="cuda").is_cuda
    assert oar.zeros_like(b).is_cuda and not oar.zeros_like(b, device="cpu").is_cuda
    leaf = oar.zeros(3, device="cuda", requires_grad=True)
    assert leaf.is_leaf and leaf.is_cuda and leaf.requires_grad
    assert "device='cuda:0'" in repr(b), repr(b)
    assert b.detach().tolist() == a.detach().tolist()
    try:
        b.detach().numpy()
    except TypeError as e:
        assert "Use Tensor.cpu()" in str(e)
    else:
        raise AssertionError("numpy() of a GPU tensor did not refuse")
    try:
        b + a
    except RuntimeError as e:
        assert "device" in str(e), str(e)
    else:
        raise AssertionError("a GPU tensor plus a host tensor did not refuse")
    try:  # no CUDA kernel (tests/cuda/cuda_gaps.txt): refused with the remedy, never computed wrongly
        F.grid_sample(oar.zeros(1, 1, 4, 4, device="cuda"), oar.zeros(1, 2, 2, 2, device="cuda"), align_corners=False)
    except RuntimeError as e:
        assert "no cuda kernel" in str(e) and "to the host" in str(e), str(e)
    else:
        raise AssertionError("grid_sample on the GPU (no CUDA kernel) did not refuse")
    oar.cuda.synchronize()
    oar.cuda.reset_peak_memory_stats()
    big = oar.zeros(1 << 20, device="cuda")  # 4 MiB
    assert oar.cuda.memory_allocated() >= 4 << 20 and oar.cuda.max_memory_allocated() >= 4 << 20
    del big
    oar.cuda.empty_cache()
    assert oar.cuda.memory_reserved() >= oar.cuda.memory_allocated()


def main():
    if not oar.cuda.is_available():
        print(f"gpu_check: skipped: oar.cuda.is_available() is False (built with CUDA: {oar.cuda.is_built()}, "
              f"devices: {oar.cuda.device_count()})")
        return 77
    check_moves_and_factories()
    loss = check_model_matches_cpu()
    print(f"gpu_check: passed (devices: {oar.cuda.device_count()}; last loss {loss:.6f}, cuda == cpu)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
