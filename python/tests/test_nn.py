"""oar.nn, oar.optim, oar.utils.data, save/load and the torch switch: the Module API, layers
against torch with torch's weights copied through state_dict (outputs and every gradient),
optimizers step for step against torch, and a small model trained in both giving the same
loss curve."""
import os

import numpy as np
import pytest

import oar
import oar.nn as nn

F = nn.functional


# ---------------------------------------------------------------- Module API
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.bn = nn.BatchNorm1d(4)
        self.register_buffer("scale", oar.ones(1))
        self.register_buffer("tmp", oar.zeros(1), persistent=False)
        self.head = nn.ModuleDict({"out": nn.Linear(4, 2, bias=False)})
        self.extra = nn.ModuleList([nn.ReLU(), nn.Identity()])

    def forward(self, x):
        for m in self.extra:
            x = m(x)
        return self.head["out"](self.bn(self.fc(x))) * self.scale


def test_module_registration_and_traversal():
    m = Block()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["fc.weight", "fc.bias", "bn.weight", "bn.bias", "head.out.weight"]
    assert [n for n, _ in m.named_buffers()] == ["scale", "tmp", "bn.running_mean", "bn.running_var",
                                                 "bn.num_batches_tracked"]
    assert list(m.state_dict()) == ["scale", "fc.weight", "fc.bias", "bn.weight", "bn.bias", "bn.running_mean",
                                    "bn.running_var", "bn.num_batches_tracked", "head.out.weight"]
    assert [n for n, _ in m.named_children()] == ["fc", "bn", "head", "extra"]
    assert len(list(m.modules())) == 8 and isinstance(m.get_submodule("head.out"), nn.Linear)
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in m.parameters())
    m.eval()
    assert not m.training and not m.bn.training
    m.train()
    assert m.fc.training
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen[-1] == "Block" and "Linear" in seen
    shared = nn.Sequential(m.fc, m.fc)
    assert len(list(shared.parameters())) == 2  # shared parameters counted once
    assert "Linear(in_features=3, out_features=4, bias=True)" in repr(m)
    assert repr(nn.Conv2d(1, 2, 3, padding=1)) == "Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))"
    m.fc.weight = nn.Parameter(oar.zeros(4, 3))
    assert m.fc.weight.sum().item() == 0


def test_hooks_and_zero_grad():
    m = nn.Linear(2, 2)
    calls = []
    h = m.register_forward_hook(lambda mod, inp, out: out * 0)
    m.register_forward_pre_hook(lambda mod, inp: calls.append(len(inp)))
    assert m(oar.ones(1, 2)).abs().sum().item() == 0 and calls == [1]
    h.remove()
    y = m(oar.ones(1, 2)).sum()
    y.backward()
    assert m.weight.grad is not None
    m.zero_grad()
    assert m.weight.grad is None


def test_state_dict_strict_and_not():
    a, b = Block(), Block()
    b.load_state_dict(a.state_dict())
    for (n, p), (_, q) in zip(a.state_dict().items(), b.state_dict().items()):
        assert (p == q).all(), n
    sd = a.state_dict()
    del sd["fc.bias"]
    sd["surplus"] = oar.ones(1)
    with pytest.raises(RuntimeError) as e:
        b.load_state_dict(sd)
    assert 'Missing key(s) in state_dict: "fc.bias"' in str(e.value)
    assert 'Unexpected key(s) in state_dict: "surplus"' in str(e.value)
    r = b.load_state_dict(sd, strict=False)
    assert r.missing_keys == ["fc.bias"] and r.unexpected_keys == ["surplus"]
    bad = a.state_dict()
    bad["fc.weight"] = oar.ones(5, 5)
    with pytest.raises(RuntimeError, match="size mismatch for fc.weight"):
        b.load_state_dict(bad)


def test_load_state_dict_calls_each_modules_hook_with_its_version():
    """torch's per-module _load_from_state_dict, given the version state_dict() recorded in its _metadata
    (torchvision's mnasnet reads it); a dict without metadata is taken as of the module's own version"""
    class Versioned(nn.Module):
        _version = 3

        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(oar.zeros(2))
            self.seen = []

        def _load_from_state_dict(self, state_dict, prefix, local_metadata, *rest):
            self.seen.append((prefix, local_metadata.get("version")))
            super()._load_from_state_dict(state_dict, prefix, local_metadata, *rest)

    m = nn.Sequential(Versioned())
    sd = m.state_dict()
    assert sd._metadata["0"] == {"version": 3}
    sd._metadata["0"] = {"version": 1}
    m.load_state_dict(sd)
    m.load_state_dict({k: v for k, v in sd.items()})
    assert m[0].seen == [("0.", 1), ("0.", 3)]


def test_save_load_roundtrip(tmp_path):
    m = Block()
    path = str(tmp_path / "m.safetensors")
    oar.save(m.state_dict(), path)
    sd = oar.load(path)
    assert list(sd) == list(m.state_dict())
    n = Block()
    n.load_state_dict(sd)
    x = oar.randn(5, 3)
    m.eval(), n.eval()
    assert (m(x) == n(x)).all()
    t = oar.arange(6).reshape(2, 3).to(oar.bfloat16)
    oar.save({"t": t, "nested": {"b": oar.tensor([True])}}, path)
    back = oar.load(path)
    assert back["t"].dtype is oar.bfloat16 and back["t"].float().tolist() == [[0, 1, 2], [3, 4, 5]]
    assert back["nested.b"].tolist() == [True]
    with open(path, "rb") as f:  # the format: 8-byte length + JSON header
        n = int.from_bytes(f.read(8), "little")
        assert b'"dtype":"BF16"' in f.read(n)


def test_save_load_interop_with_safetensors(tmp_path, torch):
    st = pytest.importorskip("safetensors.torch", reason="the safetensors package is absent")
    path = str(tmp_path / "t.safetensors")
    st.save_file({"w": torch.arange(6.0).reshape(2, 3)}, path)
    assert oar.load(path)["w"].tolist() == [[0, 1, 2], [3, 4, 5]]
    oar.save({"v": oar.ones(2, dtype=oar.int32)}, path)
    assert st.load_file(path)["v"].tolist() == [1, 1]


def test_init_and_defaults():
    oar.manual_seed(1)
    lin = nn.Linear(100, 50)
    bound = 1 / np.sqrt(100)
    w = lin.weight.detach().numpy()
    assert w.min() >= -bound and w.max() <= bound and w.std() > bound / 3
    conv = nn.Conv2d(4, 8, 3)
    assert conv.weight.shape == (8, 4, 3, 3) and conv.bias.shape == (8,)
    bn = nn.BatchNorm2d(5)
    assert bn.weight.tolist() == [1.0] * 5 and bn.running_var.tolist() == [1.0] * 5
    assert bn.num_batches_tracked.dtype is oar.int64
    e = nn.Embedding(10, 3, padding_idx=0)
    assert e.weight[0].tolist() == [0, 0, 0]
    t = oar.empty(64, 32)
    nn.init.xavier_uniform_(t)
    lim = np.sqrt(6 / 96)
    assert t.abs().max().item() <= lim
    nn.init.kaiming_normal_(t, nonlinearity="relu")
    assert abs(t.std().item() - np.sqrt(2 / 32)) < 0.03
    nn.init.constant_(t, 0.5)
    assert t.mean().item() == 0.5
    nn.init.orthogonal_(t)
    q = t.detach().numpy()
    np.testing.assert_allclose(q.T @ q, np.eye(32), atol=1e-4)


# ---------------------------------------------------------------- layers against torch
LAYERS = [
    ("Linear", lambda nn: nn.Linear(5, 3), (4, 5)),
    ("Conv2d", lambda nn: nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=True), (2, 3, 8, 8)),
    ("Conv2d_groups", lambda nn: nn.Conv2d(4, 4, 3, padding=1, groups=2, bias=False), (1, 4, 5, 5)),
    ("Conv1d", lambda nn: nn.Conv1d(3, 2, 3), (2, 3, 7)),
    ("ConvTranspose2d", lambda nn: nn.ConvTranspose2d(3, 2, 3, stride=2), (1, 3, 4, 4)),
    ("BatchNorm1d", lambda nn: nn.BatchNorm1d(4), (6, 4)),
    ("BatchNorm2d", lambda nn: nn.BatchNorm2d(3), (2, 3, 4, 4)),
    ("LayerNorm", lambda nn: nn.LayerNorm([4, 5]), (3, 4, 5)),
    ("GroupNorm", lambda nn: nn.GroupNorm(2, 4), (2, 4, 3)),
    ("Embedding", lambda nn: nn.Embedding(7, 3), "idx"),
    ("MaxPool2d", lambda nn: nn.MaxPool2d(2), (1, 2, 4, 4)),
    ("AvgPool2d", lambda nn: nn.AvgPool2d(3, stride=2, padding=1), (1, 2, 5, 5)),
    ("AdaptiveAvgPool2d", lambda nn: nn.AdaptiveAvgPool2d(1), (2, 3, 5, 5)),
    ("Flatten", lambda nn: nn.Flatten(), (2, 3, 4)),
    ("activations", lambda nn: nn.Sequential(nn.GELU(), nn.SiLU(), nn.Tanh(), nn.LeakyReLU(0.2), nn.ELU(),
                                             nn.Softplus(), nn.Hardswish(), nn.ReLU6(), nn.Sigmoid()), (3, 4)),
    ("Softmax", lambda nn: nn.LogSoftmax(dim=1), (3, 4)),
    ("mlp", lambda nn: nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Dropout(0.0), nn.Linear(8, 2)), (5, 6)),
    ("LSTM", lambda nn: _first(nn, nn.LSTM(4, 5, num_layers=2)), (3, 2, 4)),
    ("LSTM_bidirectional_batch_first", lambda nn: _first(nn, nn.LSTM(4, 3, batch_first=True, bidirectional=True)),
     (2, 5, 4)),
    ("GRU", lambda nn: _first(nn, nn.GRU(3, 4)), (4, 2, 3)),
    ("RNN_relu_unbatched", lambda nn: _first(nn, nn.RNN(3, 4, nonlinearity="relu")), (5, 3)),
]


def _first(nn, rnn):
    """The output and the final states as one flat tensor, so one comparison covers them all."""
    import importlib

    lib = importlib.import_module(nn.__name__.split(".")[0])

    class RNNOut(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = rnn

        def forward(self, x):
            out, state = self.rnn(x)
            states = state if isinstance(state, tuple) else (state,)
            return lib.cat([out.reshape(-1)] + [s.reshape(-1) for s in states])

    return RNNOut()


def copy_weights(tm, om):
    """torch's initial weights into oar through state_dict (buffers included)."""
    sd = {k: oar.from_numpy(v.detach().numpy().copy()) for k, v in tm.state_dict().items()}
    om.load_state_dict(sd)


@pytest.mark.parametrize("case", LAYERS, ids=[c[0] for c in LAYERS])
def test_layer_matches_torch(case, torch):
    name, build, shape = case
    torch.manual_seed(0)
    tm, om = build(torch.nn), build(nn)
    assert [n for n, _ in tm.named_parameters()] == [n for n, _ in om.named_parameters()]
    assert list(tm.state_dict()) == list(om.state_dict())
    copy_weights(tm, om)
    if shape == "idx":
        xn = np.random.randint(0, 7, (3, 4))
        xt, xo = torch.tensor(xn), oar.tensor(xn)
    else:
        xn = np.random.randn(*shape).astype(np.float32)
        xt, xo = torch.tensor(xn, requires_grad=True), oar.tensor(xn, requires_grad=True)
    yt, yo = tm(xt), om(xo)
    np.testing.assert_allclose(yo.detach().numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-4)
    w = np.random.randn(*yt.shape).astype(np.float32)
    (yt * torch.tensor(w)).sum().backward()
    (yo * oar.tensor(w)).sum().backward()
    for (n, pt), (_, po) in zip(tm.named_parameters(), om.named_parameters()):
        np.testing.assert_allclose(po.grad.numpy(), pt.grad.numpy(), rtol=1e-3, atol=1e-4, err_msg=n)
    if shape != "idx":
        np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-3, atol=1e-4)
    for (n, bt), (_, bo) in zip(tm.named_buffers(), om.named_buffers()):  # running statistics
        np.testing.assert_allclose(bo.numpy(), bt.numpy(), rtol=1e-4, atol=1e-5, err_msg=n)
    tm.eval(), om.eval()
    if shape != "idx":
        np.testing.assert_allclose(om(xo).detach().numpy(), tm(xt).detach().numpy(), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- optimizers against torch
OPTIMS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2)),
    ("Adam", dict(lr=1e-2)),
    ("Adam", dict(lr=1e-2, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True)),
    ("AdamW", dict(lr=1e-2)),
    ("RMSprop", dict(lr=1e-2, momentum=0.5, centered=True)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01)),
]


@pytest.mark.parametrize("kind, opts", OPTIMS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(OPTIMS)])
def test_optimizer_matches_torch(kind, opts, torch):
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    om = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    copy_weights(tm, om)
    topt, oopt = getattr(torch.optim, kind)(tm.parameters(), **opts), getattr(oar.optim, kind)(om.parameters(), **opts)
    tsched = torch.optim.lr_scheduler.StepLR(topt, 2, gamma=0.5)
    osched = oar.optim.lr_scheduler.StepLR(oopt, 2, gamma=0.5)
    x = np.random.randn(6, 4).astype(np.float32)
    y = np.random.randint(0, 3, 6)
    for _ in range(5):
        topt.zero_grad(), oopt.zero_grad()
        lt = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y))
        lo = F.cross_entropy(om(oar.tensor(x)), oar.tensor(y))
        assert abs(lt.item() - lo.item()) < 1e-5
        lt.backward(), lo.backward()
        topt.step(), oopt.step()
        tsched.step(), osched.step()
        assert tsched.get_last_lr() == pytest.approx(osched.get_last_lr())
    for (n, pt), (_, po) in zip(tm.named_parameters(), om.named_parameters()):
        np.testing.assert_allclose(po.detach().numpy(), pt.detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=n)


def test_clip_grad_norm_matches_torch(torch):
    torch.manual_seed(0)
    tm = torch.nn.Linear(5, 4)
    om = nn.Linear(5, 4)
    copy_weights(tm, om)
    x = np.random.randn(3, 5).astype(np.float32) * 10
    tm(torch.tensor(x)).pow(2).sum().backward()
    om(oar.tensor(x)).pow(2).sum().backward()
    nt = torch.nn.utils.clip_grad_norm_(tm.parameters(), 1.0)
    no = nn.utils.clip_grad_norm_(om.parameters(), 1.0)
    assert abs(nt.item() - no.item()) < 1e-3 * nt.item()
    np.testing.assert_allclose(om.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-4, atol=1e-6)


# ---------------------------------------------------------------- a small model trained in both
class LeNetish:
    @staticmethod
    def build(nn):
        return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(4 * 4 * 4, 16), nn.GELU(), nn.Linear(16, 3))


def test_training_gives_torch_loss_curve(torch):
    torch.manual_seed(0)
    tm, om = LeNetish.build(torch.nn), LeNetish.build(nn)
    copy_weights(tm, om)
    topt = torch.optim.SGD(tm.parameters(), lr=0.05, momentum=0.9)
    oopt = oar.optim.SGD(om.parameters(), lr=0.05, momentum=0.9)
    data = np.random.randn(64, 1, 8, 8).astype(np.float32)
    labels = np.digitize(data[:, 0, :4, :4].mean((1, 2)), [-0.2, 0.2])  # a learnable rule: 3 classes
    loader = oar.utils.data.DataLoader(oar.utils.data.TensorDataset(oar.tensor(data), oar.tensor(labels)),
                                       batch_size=16)
    lt_curve, lo_curve = [], []
    for epoch in range(3):
        for k, (xb, yb) in enumerate(loader):
            sl = slice(16 * k, 16 * k + 16)
            topt.zero_grad()
            lt = torch.nn.functional.cross_entropy(tm(torch.tensor(data[sl])), torch.tensor(labels[sl]))
            lt.backward()
            topt.step()
            oopt.zero_grad()
            lo = F.cross_entropy(om(xb), yb)
            lo.backward()
            oopt.step()
            lt_curve.append(lt.item())
            lo_curve.append(lo.item())
    np.testing.assert_allclose(lo_curve, lt_curve, rtol=1e-3, atol=1e-4)
    assert np.mean(lo_curve[-4:]) < np.mean(lo_curve[:4])


# ---------------------------------------------------------------- data
def test_dataloader():
    ds = oar.utils.data.TensorDataset(oar.arange(10).float(), oar.arange(10))
    assert len(ds) == 10 and ds[3][1].item() == 3
    batches = list(oar.utils.data.DataLoader(ds, batch_size=4))
    assert [b[0].shape[0] for b in batches] == [4, 4, 2]
    assert len(list(oar.utils.data.DataLoader(ds, batch_size=4, drop_last=True))) == 2
    oar.manual_seed(5)
    order = oar.cat([b[1] for b in oar.utils.data.DataLoader(ds, batch_size=3, shuffle=True)]).tolist()
    assert sorted(order) == list(range(10)) and order != list(range(10))

    class Pairs(oar.utils.data.Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return {"x": np.full(2, i, dtype=np.float32), "y": i, "name": f"s{i}"}

    b = next(iter(oar.utils.data.DataLoader(Pairs(), batch_size=2)))
    assert b["x"].shape == (2, 2) and b["y"].tolist() == [0, 1] and b["name"] == ["s0", "s1"]
    cat = oar.utils.data.DataLoader(ds, batch_size=5, collate_fn=lambda items: len(items))
    assert list(cat) == [5, 5]
    a, c = oar.utils.data.random_split(ds, [7, 3])
    assert len(a) == 7 and len(c) == 3


# ---------------------------------------------------------------- the torch switch
MODEL_FILE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x):
        return F.log_softmax(self.fc2(torch.relu(self.fc1(x))), dim=1)
'''


def test_mock_torch(tmp_path, monkeypatch):
    import sys

    (tmp_path / "third_party_model.py").write_text(MODEL_FILE)
    monkeypatch.syspath_prepend(str(tmp_path))
    real = sys.modules.get("torch")
    with oar.mock_torch():
        import torch

        assert torch is oar
        import third_party_model

        net = third_party_model.Net()
        assert isinstance(net, oar.nn.Module)
        out = net(oar.randn(3, 4))
        assert out.shape == (3, 2) and out.exp().sum(1).tolist() == pytest.approx([1, 1, 1], abs=1e-5)
    assert sys.modules.get("torch") is real
    sys.modules.pop("third_party_model", None)


def test_mock_torch_environment_variable(tmp_path):
    import subprocess
    import sys

    (tmp_path / "third_party_model.py").write_text(MODEL_FILE)
    code = ("import oar, torch, torch.nn.functional as F; import third_party_model as m; "
            "assert torch is oar and F is oar.nn.functional; print(m.Net()(torch.ones(1, 4)).shape)")
    env = dict(os.environ, OAR_MOCK_TORCH="1", PYTHONPATH=os.pathsep.join([str(tmp_path)] + sys.path))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "oar.Size([1, 2])" in r.stdout


def test_mock_runner_and_path(tmp_path):
    import subprocess
    import sys

    (tmp_path / "third_party_model.py").write_text(MODEL_FILE)
    script = tmp_path / "train.py"
    script.write_text("import torch, third_party_model as m\n"
                      "import torch.optim as optim\n"
                      "net = m.Net(); opt = optim.SGD(net.parameters(), lr=0.1)\n"
                      "loss = -net(torch.ones(2, 4))[:, 0].mean(); loss.backward(); opt.step()\n"
                      "print(type(torch.ones(1)).__module__, loss.shape)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-m", "oar.mock", str(script)], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("oar._tensor")
    path = subprocess.run([sys.executable, "-m", "oar.mock", "--path"], env=env, capture_output=True,
                          text=True).stdout.strip()
    env["PYTHONPATH"] = os.pathsep.join([path] + sys.path)
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("oar._tensor")
