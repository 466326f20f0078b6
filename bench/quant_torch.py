#!/usr/bin/env python3
"""PyTorch's int8 inference on the models of `oar bench --workload quant-infer`, same protocol.

Run with Debian's python3-torch:
    /usr/bin/python3 bench/quant_torch.py --model lenet --quant static --batch 32 --threads 2
LeNet (conv 1-6 5x5 pad 2, conv 6-16 5x5, fc 400-120-84-10, ReLU and 2x2 max pools), the MLP
(784-512-512-10), lstm-lm and gpt-mini (random token ids; dynamic: Linear and LSTM with int8
weights per row, per_channel_dynamic_qconfig, as oar quantizes them) and CIFAR ResNet-20 (3x28x28 inputs as oar's bench gives it; conv+bn(+relu)
fused for int8, residual adds as quantized adds) as in oar's zoo, random weights, eval mode. --quant none: fp32; dynamic:
torch.ao.quantization.quantize_dynamic on the Linear layers; static: eager-mode PTQ with the
fbgemm (x86) backend where the build has it, else onednn (Debian's 1.13), conv+relu and linear+relu fused, calibrated on two random batches of 32.
Timed as oar times it: a warm-up repeat, then R repeats of C calls; prints one JSON line with
the median milliseconds per call and the fastest and slowest repeat.
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.ao.quantization as tq


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.c1, self.r1 = nn.Conv2d(1, 6, 5, padding=2), nn.ReLU()
        self.c2, self.r2 = nn.Conv2d(6, 16, 5), nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.f1, self.r3 = nn.Linear(400, 120), nn.ReLU()
        self.f2, self.r4 = nn.Linear(120, 84), nn.ReLU()
        self.f3 = nn.Linear(84, 10)
        self.fuse = [["c1", "r1"], ["c2", "r2"], ["f1", "r3"], ["f2", "r4"]]

    def forward(self, x):
        x = self.quant(x)
        x = self.pool(self.r1(self.c1(x)))
        x = self.pool(self.r2(self.c2(x)))
        x = torch.flatten(x, 1)
        x = self.r4(self.f2(self.r3(self.f1(x))))
        return self.dequant(self.f3(x))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.fc1, self.r1 = nn.Linear(784, 512), nn.ReLU()
        self.fc2, self.r2 = nn.Linear(512, 512), nn.ReLU()
        self.fc3 = nn.Linear(512, 10)
        self.fuse = [["fc1", "r1"], ["fc2", "r2"]]

    def forward(self, x):
        x = self.quant(torch.flatten(x, 1))
        x = self.r2(self.fc2(self.r1(self.fc1(x))))
        return self.dequant(self.fc3(x))


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.bn1, self.r1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        self.add, self.r2 = nn.quantized.FloatFunctional(), nn.ReLU()

    def forward(self, x):
        y = self.bn2(self.conv2(self.r1(self.bn1(self.conv1(x)))))
        return self.r2(self.add.add(y, self.short(x) if self.short is not None else x))


class ResNet20(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.conv1, self.bn1, self.r1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()
        blocks, cin = [], 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(3):
                blocks.append(Block(cin, cout, stride if i == 0 else 1))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.pool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(64, 10)
        self.fuse = [["conv1", "bn1", "r1"]]
        for i, b in enumerate(blocks):
            self.fuse += [[f"blocks.{i}.conv1", f"blocks.{i}.bn1", f"blocks.{i}.r1"], [f"blocks.{i}.conv2", f"blocks.{i}.bn2"]]
            if b.short is not None:
                self.fuse.append([f"blocks.{i}.short.0", f"blocks.{i}.short.1"])

    def forward(self, x):
        x = self.blocks(self.r1(self.bn1(self.conv1(self.quant(x)))))
        return self.dequant(self.fc(torch.flatten(self.pool(x), 1)))


class LSTMLM(nn.Module):
    """oar's lstm-lm: Embedding(10000, 200), 2-layer LSTM(200), Linear(200, 10000), [T, N] ids"""

    def __init__(self, vocab=10000, width=200):
        super().__init__()
        self.emb, self.rnn, self.dec = nn.Embedding(vocab, width), nn.LSTM(width, width, 2), nn.Linear(width, vocab)

    def forward(self, x):
        return self.dec(self.rnn(self.emb(x))[0])


class Attention(nn.Module):
    def __init__(self, d, heads, ctx):
        super().__init__()
        self.qkv, self.proj, self.heads = nn.Linear(d, 3 * d), nn.Linear(d, d), heads
        self.register_buffer("mask", torch.ones(ctx, ctx, dtype=torch.bool).triu(1))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.reshape(B, T, self.heads, C // self.heads).transpose(1, 2) for t in self.qkv(x).chunk(3, 2))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (C // self.heads) ** 0.5)
        att = att.masked_fill(self.mask[:T, :T], float("-inf")).softmax(-1)
        return self.proj((att @ v).transpose(1, 2).reshape(B, T, C))


class GPTBlock(nn.Module):
    def __init__(self, d, heads, ctx, hidden):
        super().__init__()
        self.ln1, self.attn, self.ln2 = nn.LayerNorm(d), Attention(d, heads, ctx), nn.LayerNorm(d)
        self.fc, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPTMini(nn.Module):
    """oar's gpt-mini: pre-LN decoder, vocab 256, context 128, 4 layers, 4 heads, d 256, MLP 1024,
    learned positions, head tied to the embedding (a plain matmul: stays fp32 in both frameworks)"""

    def __init__(self, vocab=256, ctx=128, d=256, layers=4, heads=4, hidden=1024):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.Sequential(*[GPTBlock(d, heads, ctx, hidden) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        return nn.functional.linear(self.ln_f(self.blocks(x)), self.wte.weight)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="lenet", choices=["lenet", "mlp", "resnet20", "lstm-lm", "gpt-mini"])
    p.add_argument("--quant", default="none", choices=["none", "dynamic", "static"])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--calls", type=int, default=0)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    # fbgemm where this build has it (Debian's 1.13 has onednn and qnnpack only)
    engines = torch.backends.quantized.supported_engines
    engine = next(e for e in ("fbgemm", "x86", "onednn", "qnnpack") if e in engines)
    torch.backends.quantized.engine = engine
    torch.manual_seed(1)
    tokens = a.model in ("lstm-lm", "gpt-mini")
    if tokens and a.quant == "static":
        p.error("the token models (lstm-lm, gpt-mini) have --quant none or dynamic")
    calls = a.calls or ((3 if a.batch > 8 else 20) if tokens else (20 if a.batch > 8 else 200))
    m = {"lenet": LeNet, "mlp": MLP, "resnet20": ResNet20, "lstm-lm": LSTMLM, "gpt-mini": GPTMini}[a.model]().eval()
    cin = 3 if a.model == "resnet20" else 1
    if tokens and a.quant == "dynamic":  # int8 weights per row, as oar's oar_quantize_dynamic
        qc = tq.per_channel_dynamic_qconfig
        m = tq.quantize_dynamic(m, {nn.Linear: qc, nn.LSTM: qc}, dtype=torch.qint8)
    elif a.quant == "dynamic":
        m = tq.quantize_dynamic(m, {nn.Linear}, dtype=torch.qint8)
    elif a.quant == "static":
        torch.backends.quantized.engine = engine
        m.qconfig = tq.get_default_qconfig(engine)
        m = tq.fuse_modules(m, m.fuse)
        tq.prepare(m, inplace=True)
        with torch.no_grad():
            for _ in range(2):
                m(torch.randn(32, cin, 28, 28))
        tq.convert(m, inplace=True)
    if a.model == "lstm-lm":
        x = torch.randint(0, 10000, (35, a.batch))  # sequence first, as oar's
    elif a.model == "gpt-mini":
        x = torch.randint(0, 256, (a.batch, 128))
    else:
        x = torch.randn(a.batch, cin, 28, 28)
    ms = []
    with torch.inference_mode():
        for r in range(-1, a.repeats):
            t0 = time.perf_counter()
            for _ in range(calls):
                m(x)
            if r >= 0:
                ms.append((time.perf_counter() - t0) * 1e3 / calls)
    ms.sort()
    print(json.dumps({"workload": "quant-infer", "framework": "torch " + torch.__version__, "engine": engine, "model": a.model,
                      "quant": a.quant, "batch": a.batch, "threads": a.threads, "repeats": a.repeats,
                      "calls": calls, "ms_median": round(ms[len(ms) // 2], 4), "ms_min": round(ms[0], 4),
                      "ms_max": round(ms[-1], 4)}))


if __name__ == "__main__":
    main()
