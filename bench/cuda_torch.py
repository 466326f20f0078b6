"""The GPU micro-benchmarks of bench/cuda_bench.c, in PyTorch on the same GPU, as JSON lines:
GEMM 4096^3 (f32 with TF32 off, bf16), copy bandwidth against torch.add, host time per eager
op call, and an eager training step of the same MLP (784-512-512-10, batch 256, SGD).
tests/cuda/run_on_device.sh runs it beside the oar program; ratios are taken from both.
`--gpt2 eager|compile` runs instead the GPT-2-124M bf16 training step of bench/cuda_gpt2.c
(same shapes, init, AdamW and FLOP count), eager or under torch.compile."""
import json
import os
import statistics
import sys
import time

import torch

REPS = 7


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn, iters):
    fn()
    sync()
    out = []
    for _ in range(REPS):
        sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
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
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            torch.add(one_a, one_b)
        per.append((time.perf_counter() - t0) / calls)
        sync()
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
    zoo(dev, None)
    if "--compile" in sys.argv:  # torch.compile, plain and with CUDA graphs (oar's static+graphs peer)
        for mode in os.environ.get("TORCH_COMPILE_MODES", "default reduce-overhead").split():
            zoo(dev, mode)


# ---- the zoo, as oar defines it (models/*.c), for eager training steps on the GPU
F = torch.nn.functional
nn = torch.nn


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(1, 6, 5, padding=2), nn.Conv2d(6, 16, 5)
        self.f1, self.f2, self.f3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2).flatten(1)
        return self.f3(F.relu(self.f2(F.relu(self.f1(x)))))


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(out + (x if self.short is None else self.short(x)))


class ResNet20(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16)
        layers, cin = [], 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(3):
                layers.append(Block(cin, cout, stride if i == 0 else 1))
                cin = cout
        self.layers, self.fc = nn.Sequential(*layers), nn.Linear(64, 10)

    def forward(self, x):
        x = self.layers(F.relu(self.bn(self.conv(x))))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class GPTBlock(nn.Module):
    def __init__(self, d=256, heads=4, ctx=128):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer("mask", torch.triu(torch.ones(ctx, ctx, dtype=torch.bool), 1))

    def attn(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (c // self.heads) ** 0.5
        att = att.masked_fill(self.mask[:t, :t], float("-inf")).softmax(-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPTMini(nn.Module):
    def __init__(self, vocab=256, ctx=128, d=256, layers=4):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.Sequential(*[GPTBlock(d, 4, ctx) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        return self.ln_f(self.blocks(x)) @ self.wte.weight.t()


class LSTMLM(nn.Module):
    def __init__(self, vocab=10000, width=200):
        super().__init__()
        self.emb, self.rnn, self.dec = nn.Embedding(vocab, width), nn.LSTM(width, width, 2), nn.Linear(width, vocab)

    def forward(self, x):
        return self.dec(self.rnn(self.emb(x))[0])


def zoo(dev, compile_mode):
    """Training steps of the zoo: eager (compile_mode None) or with the model under
    torch.compile(mode=compile_mode); "reduce-overhead" replays CUDA graphs."""
    tiny = lambda: nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    mlp = lambda: nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                                nn.Linear(512, 10))
    cases = [("tiny", tiny, lambda b: torch.randn(b, 64), 64, None), ("mlp", mlp, lambda b: torch.randn(b, 1, 28, 28), 64, None),
             ("lenet", LeNet, lambda b: torch.randn(b, 1, 28, 28), 64, None),
             ("resnet20", ResNet20, lambda b: torch.randn(b, 3, 32, 32), 32, None),
             ("gpt-mini", GPTMini, lambda b: torch.randint(0, 256, (b, 128)), 16, 256),
             ("lstm-lm", LSTMLM, lambda b: torch.randint(0, 10000, (35, b)), 20, 10000)]
    for name, make, inputs, batch, vocab in cases:
        torch.manual_seed(1)
        model = make().to(dev)
        x = inputs(batch).to(dev)
        y = torch.randint(0, vocab or 10, x.shape if vocab else (batch,), device=dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        fwd = torch.compile(model, mode=compile_mode) if compile_mode else model

        def step():
            z = fwd(x)
            loss = F.cross_entropy(z.reshape(-1, vocab) if vocab else z, y.reshape(-1) if vocab else y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        try:
            ms = timed(step, 10) * 1e3
            mode = "compile " + compile_mode if compile_mode else "eager"
            print(json.dumps({"bench": "zoo", "model": name, "mode": mode, "batch": batch, "torch_step_ms": ms}),
                  flush=True)
        except Exception as e:  # torch.compile may be unavailable on the machine
            print(json.dumps({"bench": "zoo", "model": name, "mode": compile_mode, "error": str(e)[:200]}))


# ---- GPT-2-124M, as bench/cuda_gpt2.c builds it: d 768, 12 layers, 12 heads, context 1024,
# vocab 50257, tied head, pre-LN, tanh-GELU, SDPA (flash attention on the GPU), autocast bf16
class GPT2Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch < 2.0: the same product, unfused
            att = (q @ k.transpose(-2, -1)) / (k.shape[-1] ** 0.5)
            att = att.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
            y = att.softmax(-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, vocab=50257, ctx=1024, layers=12, heads=12, d=768):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.h = nn.ModuleList(GPT2Block(d, heads) for _ in range(layers))
        self.lnf = nn.LayerNorm(d)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / (2 * layers) ** 0.5 if name.endswith(("proj.weight", "out.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for b in self.h:
            x = b(x)
        logits = F.linear(self.lnf(x), self.wte.weight)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


GPU_BF16_PEAK = [("H100 PCIe", 756e12), ("H100", 989e12), ("H200", 989e12), ("A100", 312e12)]


def gpt2(mode, batch=8, steps=6, warmup=2):
    dev = torch.device("cuda")
    torch.manual_seed(1234)
    model = GPT2().to(dev)
    n = sum(p.numel() for p in model.parameters())
    n_flop = n - model.wpe.weight.numel()
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)
    fwd = torch.compile(model) if mode == "compile" else model
    idx = torch.randint(0, 50257, (batch, 1024), device=dev)
    tgt = torch.randint(0, 50257, (batch, 1024), device=dev)
    times, losses = [], []
    for s in range(warmup + steps):
        sync()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fwd(idx, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        sync()
        if s >= warmup:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    name = torch.cuda.get_device_name(0)
    peak = next((p for key, p in GPU_BF16_PEAK if all(w in name for w in key.split())), 0)
    tokens = batch * 1024
    flops = (6 * n_flop + 12 * 12 * 1024 * 768) * tokens
    print(json.dumps({"bench": "gpt2-124m", "impl": "torch", "mode": mode, "precision": "amp-bf16", "gpu": name,
                      "torch": torch.__version__, "params": n, "batch": batch, "steps": steps,
                      "step_ms": med * 1e3, "step_ms_min": min(times) * 1e3, "step_ms_max": max(times) * 1e3,
                      "tokens_per_s": tokens / med, "tflops": flops / med * 1e-12,
                      "mfu": flops / med / peak if peak else None, "loss_first": losses[0],
                      "loss_last": losses[-1], "peak_mem_gib": torch.cuda.max_memory_allocated() / 2 ** 30}),
          flush=True)


if __name__ == "__main__":
    if "--gpt2" in sys.argv:
        mode = sys.argv[sys.argv.index("--gpt2") + 1] if len(sys.argv) > sys.argv.index("--gpt2") + 1 else "eager"
        try:
            gpt2(mode)
        except Exception as e:  # torch.compile may be unavailable on the machine
            print(json.dumps({"bench": "gpt2-124m", "impl": "torch", "mode": mode, "error": str(e)[:300]}))
    else:
        main()
