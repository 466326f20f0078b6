"""GPU tensors from Python, checked on a machine with a GPU: a small model's forward, backward and
SGD steps on 'cuda' against the same model on 'cpu' (same weights, same batch), device moves
in both directions with gradients flowing back across them, the factories' device=, printing,
what has no CUDA kernel failing with a message, and the vision ops (grid_sample, roi_align, nms)
on 'cuda' equal to 'cpu'. numpy only (no pytest, no torch), so
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
        oar.ops.choose_qparams(oar.zeros(4, device="cuda"), dtype=oar.int8.code, symmetric=0)
    except RuntimeError as e:
        assert "no cuda kernel" in str(e) and "to the host" in str(e), str(e)
    else:
        raise AssertionError("choose_qparams on the GPU (no CUDA kernel) did not refuse")
    oar.cuda.synchronize()
    oar.cuda.reset_peak_memory_stats()
    big = oar.zeros(1 << 20, device="cuda")  # 4 MiB
    assert oar.cuda.memory_allocated() >= 4 << 20 and oar.cuda.max_memory_allocated() >= 4 << 20
    del big
    oar.cuda.empty_cache()
    assert oar.cuda.memory_reserved() >= oar.cuda.memory_allocated()


def _forward_backward(f, inputs, dev, w):
    """f of inputs (numpy arrays, each a leaf on dev) and the gradients of sum(f * w)"""
    leaves = [oar.tensor(v, device=dev, requires_grad=True) for v in inputs]
    y = f(*leaves)
    (y * oar.tensor(w, device=dev)).sum().backward()
    return [y] + [t.grad for t in leaves]


def check_vision_matches_cpu(dev="cuda"):
    """grid_sample (4-d and 5-d, every mode; gradients of input and grid), roi_align (input's
    gradient) and nms / batched_nms on dev give the cpu's results"""
    R = np.random.RandomState(1)
    cases = [((2, 3, 7, 9), (2, 5, 6, 2), "bilinear", "zeros", False),
             ((2, 3, 7, 9), (2, 5, 6, 2), "bicubic", "reflection", True),
             ((2, 3, 7, 9), (2, 5, 6, 2), "bicubic", "border", False),
             ((1, 2, 6, 5), (1, 40, 40, 2), "nearest", "border", False),  # many points on each pixel
             ((1, 2, 6, 5), (1, 40, 40, 2), "bilinear", "reflection", True),
             ((1, 2, 4, 5, 6), (1, 3, 4, 5, 3), "bilinear", "border", True),
             ((1, 2, 4, 5, 6), (1, 3, 4, 5, 3), "nearest", "zeros", False)]
    for xs, gs, mode, pad, ac in cases:
        x = R.randn(*xs).astype(np.float32)
        g = (R.rand(*gs) * 2.4 - 1.2).astype(np.float32)  # past the borders too
        w = R.randn(*(xs[:2] + gs[1:-1])).astype(np.float32)
        f = lambda a, b: F.grid_sample(a, b, mode=mode, padding_mode=pad, align_corners=ac)
        want, got = (_forward_backward(f, (x, g), d, w) for d in ("cpu", dev))
        what = f"grid_sample {mode} {pad} align_corners={ac} {len(xs)}-d"
        assert all(t.device.type == dev for t in got), what
        _close(got[0], want[0], what + ": output")
        _close(got[1], want[1], what + ": input gradient")
        _close(got[2], want[2], what + ": grid gradient", rtol=1e-3, atol=1e-4)
    x = R.randn(2, 3, 10, 12).astype(np.float32)
    boxes = np.array([[0, 1.2, 0.5, 7.9, 6.1], [1, -1.0, 2.0, 13.5, 9.0], [0, 3, 3, 5, 4.5], [1, 2, 2, 9, 8]],
                     np.float32)
    w = R.randn(4, 3, 3, 4).astype(np.float32)
    for ratio, aligned in ((-1, True), (2, False)):
        f = lambda a: oar.ops.roi_align(a, oar.tensor(boxes, device=a.device), (3, 4), spatial_scale=0.8,
                                        sampling_ratio=ratio, aligned=aligned)
        want, got = (_forward_backward(f, (x,), d, w) for d in ("cpu", dev))
        _close(got[0], want[0], f"roi_align sampling_ratio={ratio}: output")
        _close(got[1], want[1], f"roi_align sampling_ratio={ratio}: input gradient")
    corners = R.rand(300, 2) * 60
    boxes = np.concatenate([corners, corners + 4 + R.rand(300, 2) * 20], 1).astype(np.float32)
    scores = (np.floor(R.rand(300) * 8) / 8).astype(np.float32)  # ties: the lower index first
    cls = R.randint(0, 3, 300)
    for thr in (0.0, 0.3, 0.7):
        keep = [oar.ops.nms(oar.tensor(boxes, device=d), oar.tensor(scores, device=d), thr) for d in ("cpu", dev)]
        assert keep[1].device.type == dev and keep[1].tolist() == keep[0].tolist(), f"nms {thr}"
        keep = [oar.ops.batched_nms(oar.tensor(boxes, device=d), oar.tensor(scores, device=d),
                                    oar.tensor(cls, device=d), thr) for d in ("cpu", dev)]
        assert keep[1].tolist() == keep[0].tolist(), f"batched_nms {thr}"


def main():
    if not oar.cuda.is_available():
        print(f"gpu_check: skipped: oar.cuda.is_available() is False (built with CUDA: {oar.cuda.is_built()}, "
              f"devices: {oar.cuda.device_count()})")
        return 77
    check_moves_and_factories()
    check_vision_matches_cpu()
    loss = check_model_matches_cpu()
    print(f"gpu_check: passed (devices: {oar.cuda.device_count()}; last loss {loss:.6f}, cuda == cpu)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
