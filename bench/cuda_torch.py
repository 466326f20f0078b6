"""The GPU micro-benchmarks of bench/cuda_bench.c, in PyTorch on the same GPU, as JSON lines:
GEMM 4096^3 (f32 with TF32 off, bf16), copy bandwidth against torch.add, host time per eager
op call, and an eager training step of the same MLP (784-512-512-10, batch 256, SGD).
tests/cuda/run_on_device.sh runs it beside the oar program; ratios are taken from both."""
import json
import statistics
import time

import torch

REPS = 7


def timed(fn, iters):
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(REPS):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) / iters)
    return statistics.median(out)


def main():
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    one_a = torch.ones(1, device=dev)
    one_b = torch.ones(1, device=dev)
    calls = 20000
    per = []
    for _ in range(REPS):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            torch.add(one_a, one_b)
        per.append((time.perf_counter() - t0) / calls)
        torch.cuda.synchronize()
    print(json.dumps({"bench": "overhead", "op": "add", "torch_host_us_per_call": statistics.median(per) * 1e6}))

    n = 256 << 20
    x = torch.ones(n, device=dev)
    y = torch.ones(n, device=dev)
    dst = torch.empty(n, device=dev)
    t_copy = timed(lambda: dst.copy_(x), 5)
    t_add = timed(lambda: torch.add(x, y), 5)
    copy_gbs, add_gbs = 2 * n * 4 / t_copy * 1e-9, 3 * n * 4 / t_add * 1e-9
    print(json.dumps({"bench": "bandwidth", "torch_copy_gbs": round(copy_gbs), "torch_add_gbs": round(add_gbs)}))
    del x, y, dst

    for dt, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        a = torch.randn(4096, 4096, device=dev).to(dt)
        b = torch.randn(4096, 4096, device=dev).to(dt)
        t = timed(lambda: a @ b, 10)
        print(json.dumps({"bench": "gemm", "dtype": name, "n": 4096, "torch_ms": t * 1e3,
                          "torch_tflops": 2 * 4096 ** 3 / t * 1e-12}))

    torch.manual_seed(0)
    xb = torch.randn(256, 784, device=dev)
    yb = torch.randint(0, 10, (256,), device=dev)
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad()
    print(json.dumps({"bench": "mlp", "mode": "eager", "batch": 256, "torch_step_ms": timed(step, 20) * 1e3}))


if __name__ == "__main__":
    main()
