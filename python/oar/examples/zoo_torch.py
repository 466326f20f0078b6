"""Three of oar's zoo workloads as plain PyTorch code (only `import torch`): CIFAR ResNet-20,
gpt-mini and lstm-lm, with the shapes, batches and optimizers of the C zoo's reference
workloads. `python -m oar.bench --zoo` loads this file twice, once with PyTorch and once under
oar.mock_torch(), and times the same training steps in both (and compiled with oar.jit.to_static).

    step, batch = make_step("resnet20", batch=32)   # step() runs one training step, returns the loss
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:  # 1x1 projection where the shape changes
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (x if self.short is None else self.short(x)))


class ResNet20(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        blocks, cin = [], 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(3):
                blocks.append(BasicBlock(cin, cout, stride if i == 0 else 1))
                cin = cout
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.layers(F.relu(self.bn(self.conv(x))))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads, ctx):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.register_buffer("future", torch.triu(torch.ones(ctx, ctx, dtype=torch.bool), 1))

    def forward(self, x):
        B, T, C = x.shape
        hd = C // self.heads
        q, k, v = (t.reshape(B, T, self.heads, hd).transpose(1, 2) for t in self.qkv(x).split(C, dim=2))
        att = (q @ k.transpose(-2, -1)) * (1.0 / hd ** 0.5)
        att = F.softmax(att.masked_fill(self.future[:T, :T], float("-inf")), dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    def __init__(self, d, heads, ctx, hidden):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, ctx)
        self.fc, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)
        self.act = nn.GELU(approximate="tanh")

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(self.act(self.fc(self.ln2(x))))


class GPTMini(nn.Module):
    """Pre-LayerNorm decoder, learned positions, input and output embedding tied."""

    def __init__(self, vocab=256, ctx=128, layers=4, heads=4, d=256, hidden=1024):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.Sequential(*[Block(d, heads, ctx, hidden) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
                if isinstance(m, nn.Linear):
                    nn.init.zeros_(m.bias)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T)).unsqueeze(0)
        return F.linear(self.ln_f(self.blocks(x)), self.wte.weight)


class LSTMLM(nn.Module):
    def __init__(self, ntoken=10000, width=200, layers=2):
        super().__init__()
        self.emb = nn.Embedding(ntoken, width)
        self.rnn = nn.LSTM(width, width, layers)  # (T, B, C)
        self.dec = nn.Linear(width, ntoken)

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.emb(x), hidden)
        return self.dec(out), hidden


def make(name, batch=None):
    """(model, optimizer, inputs, step) for a workload: step(*inputs) runs one training step
    and returns the loss (lstm-lm: the loss and the next hidden state)."""
    torch.manual_seed(1234)
    rand, randn = torch.randint, torch.randn
    if name == "resnet20":
        B = batch or 32
        model = ResNet20().train()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
        inputs = (randn(B, 3, 32, 32), rand(0, 10, (B,)))

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        return model, opt, inputs, step
    if name == "gpt-mini":
        B, T = batch or 8, 128
        model = GPTMini()
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
        data = rand(0, 256, (B, T + 1))
        inputs = (data[:, :-1].contiguous(), data[:, 1:].contiguous())

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1))
            loss.backward()
            opt.step()
            return loss

        return model, opt, inputs, step
    if name == "lstm-lm":
        T, B = 35, batch or 20
        model = LSTMLM()
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        data = rand(0, 10000, (T + 1, B))
        inputs = (data[:-1].contiguous(), data[1:].contiguous(), torch.zeros(2, B, 200), torch.zeros(2, B, 200))

        def step(x, y, h, c):  # truncated backpropagation through time: the state carries, detached
            opt.zero_grad()
            out, (h, c) = model(x, (h.detach(), c.detach()))
            loss = F.cross_entropy(out.reshape(-1, 10000), y.reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            opt.step()
            return loss, h, c

        return model, opt, inputs, step
    raise ValueError(f"zoo_torch: unknown workload {name!r} (resnet20, gpt-mini, lstm-lm)")


WORKLOADS = ("resnet20", "gpt-mini", "lstm-lm")
