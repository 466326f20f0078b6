"""torch.jit on oar: trace / trace_module / script / freeze / optimize_for_inference / save / load
over oar's tracer and predictor. Real models (an MLP, a CNN with BatchNorm in eval mode, an LSTM,
a transformer encoder layer) are traced in oar and in torch 1.13 with the same weights and must
agree, at the traced batch and at another; saved models run in another process with no model
code; torch's warnings and errors where oar meets the same situation."""
import copy
import io
import os
import subprocess
import sys
import warnings
import zipfile

import numpy as np
import pytest

import oar

RTOL, ATOL = 1e-4, 1e-5


# ---- the models, written once over a namespace: torch's or oar's
def make_models(t):
    nn = t.nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(6, 16), nn.Linear(16, 3)

        def forward(self, x):
            return t.tanh(self.fc2(t.relu(self.fc1(x))))

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
            self.conv2, self.bn2 = nn.Conv2d(8, 8, 3), nn.BatchNorm2d(8)
            self.head = nn.Linear(8, 4)

        def forward(self, x):
            h = t.max_pool2d(t.relu(self.bn1(self.conv1(x))), 2)
            h = t.relu(self.bn2(self.conv2(h)))
            return self.head(h.mean((2, 3)))

    class LSTMNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(5, 7, batch_first=True)

        def forward(self, x):
            out, (h, c) = self.lstm(x)
            return out, (h, c)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)

        def forward(self, x):
            return self.layer(x)

    class ResBlock(nn.Module):
        """torchvision's BasicBlock pattern: in-place ReLU and `out += identity`."""

        def __init__(self):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4)
            self.conv2, self.bn2 = nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4)
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += x
            return self.relu(out)

    return {"mlp": (MLP, (4, 6), (9, 6)), "cnn": (CNN, (2, 3, 10, 10), (5, 3, 10, 10)),
            "resblock": (ResBlock, (2, 4, 6, 6), (3, 4, 6, 6)),
            "lstm": (LSTMNet, (3, 4, 5), (6, 4, 5)), "encoder": (Encoder, (2, 5, 16), (3, 5, 16))}


def twin(torch, name):
    """The torch model (seeded, BatchNorm statistics made non-trivial) and oar's with its weights."""
    torch.manual_seed(0)
    cls, shape, other = make_models(torch)[name]
    tm = cls()
    for mod in tm.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 2.0)
    tm.eval()
    om = make_models(oar)[name][0]()
    om.load_state_dict({k: oar.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    om.eval()
    return tm, om, shape, other


def torch_trace(torch, *args, **kwargs):
    """torch's trace, without its own TracerWarnings about torch's layers (shape asserts)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.jit.trace(*args, **kwargs)


def flat_np(out):
    if isinstance(out, (tuple, list)):
        return [a for o in out for a in flat_np(o)]
    return [out.detach().numpy()]


MODELS = ["mlp", "cnn", "resblock", "lstm", "encoder"]


@pytest.mark.parametrize("name", MODELS)
def test_trace_matches_torch(torch, name):
    tm, om, shape, other = twin(torch, name)
    x = np.random.randn(*shape).astype(np.float32)
    x2 = np.random.randn(*other).astype(np.float32)
    tt = torch_trace(torch, tm, torch.tensor(x), check_trace=False)  # (torch fails its own check on the encoder)
    with warnings.catch_warnings(), oar.no_grad():  # (in-place ops are traced without gradients)
        warnings.simplefilter("error")  # nothing on these models makes oar's tracer warn
        ot = oar.jit.trace(om, oar.tensor(x))
    assert ot._calls["forward"].eager_reason is None  # one program, in-place ops included
    assert isinstance(ot, oar.jit.TopLevelTracedModule) and isinstance(ot, oar.jit.ScriptModule)
    assert isinstance(ot, oar.jit.TracedModule) and ot.original_name == type(om).__name__
    for xi in (x, x2):  # the traced batch and another (traced again for its shape)
        with oar.no_grad():
            got = ot(oar.tensor(xi))
        want = tt(torch.tensor(xi))
        assert isinstance(got, tuple) == isinstance(want, tuple)
        for g, w in zip(flat_np(got), flat_np(want)):
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)
    assert "program:" in ot.code and str(ot.graph) == ot.code
    # the traced module shares its state with the module it came from, under the same names
    assert list(ot.state_dict()) == list(om.state_dict())
    assert all(a is b for a, b in zip(ot.parameters(), om.parameters()))


def test_traced_module_follows_weight_updates_and_trains(torch):
    tm, om, shape, _ = twin(torch, "mlp")
    x = oar.randn(*shape)
    ot = oar.jit.trace(om, x)
    with oar.no_grad():
        before = ot(x)
        om.fc2.bias.add_(1.0)  # bound by reference: the program reads the current weights
        after = ot(x)
        np.testing.assert_allclose(after.numpy(), om(x).numpy(), rtol=RTOL, atol=ATOL)
    assert not np.allclose(before.numpy(), after.numpy())
    # with gradients wanted it runs eagerly, so training through it gives eager's gradients
    ot(x).sum().backward()
    g_traced = om.fc1.weight.grad.numpy().copy()
    om.zero_grad()
    om(x).sum().backward()
    np.testing.assert_array_equal(g_traced, om.fc1.weight.grad.numpy())


def test_batchnorm_train_mode_updates_running_stats_like_torch(torch):
    """In-place writes under no_grad in a traced program (BatchNorm's running statistics in train mode)."""
    tm, om, shape, _ = twin(torch, "cnn")
    tm.train(), om.train()
    x = np.random.randn(*shape).astype(np.float32)
    with torch.no_grad():
        tt = torch_trace(torch, tm, torch.tensor(x), check_trace=False)
    with oar.no_grad():
        ot = oar.jit.trace(om, oar.tensor(x), check_trace=False)
        for _ in range(2):
            got = ot(oar.tensor(x))
    with torch.no_grad():
        for _ in range(2):
            want = tt(torch.tensor(x))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=RTOL, atol=ATOL)
    for key in ("bn1.running_mean", "bn1.running_var", "bn2.running_var", "bn1.num_batches_tracked"):
        np.testing.assert_allclose(om.state_dict()[key].numpy(), tm.state_dict()[key].numpy(), rtol=RTOL, atol=ATOL)


def test_trace_function_nested_outputs_and_other_shapes(torch):
    def f(x, pair):
        a, b = pair
        return x * a + b, (x.sum(0), b - x)

    args = (oar.ones(3, 2), (oar.full((3, 2), 2.0), oar.ones(2)))
    tf = oar.jit.trace(f, args)
    assert isinstance(tf, oar.jit.ScriptFunction)
    x, a, b = oar.randn(5, 2), oar.randn(5, 2), oar.randn(2)
    with oar.no_grad():
        got = tf(x, (a, b))
    want = f(x, (a, b))
    assert isinstance(got, tuple) and isinstance(got[1], tuple)
    for g, w in zip(flat_np(got), flat_np(want)):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_data_dependent_code_warns_and_stays_correct(torch):
    def f(x):
        if x.sum() > 0:
            return x * 2
        return -x

    def g(x):
        return x * x.max().item()

    for fn, kind in ((f, "boolean"), (g, "number")):
        with pytest.warns(Warning) as rec:
            torch.jit.trace(fn, torch.ones(3))
        with pytest.warns(oar.jit.TracerWarning) as ours:
            tf = oar.jit.trace(fn, oar.ones(3))
        prefix = f"Converting a tensor to a Python {kind} might cause the trace to be incorrect"
        assert any(str(w.message).startswith(prefix) for w in rec)  # torch's words ...
        assert any(str(w.message).startswith(prefix) for w in ours)  # ... and oar's
        assert ours[0].filename == __file__  # pointing at the caller
        for v in (oar.full((3,), -2.0), oar.full((3,), 3.0)):  # torch's trace would replay one branch
            with oar.no_grad():
                np.testing.assert_array_equal(tf(v).numpy(), fn(v).numpy())
        with pytest.raises(RuntimeError, match="runs eagerly"):
            tf.code


def test_check_trace_warns_on_mismatch(torch):
    def noisy(x):
        return x + oar.rand_like(x)

    with pytest.warns(oar.jit.TracerWarning, match=r"Output nr 1\. of the traced function does not match"):
        oar.jit.trace(noisy, oar.ones(4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        oar.jit.trace(noisy, oar.ones(4), check_trace=False)
        # check_inputs of other shapes: each is traced for its shape and checked, silently when equal
        m = oar.nn.Sequential(oar.nn.Linear(3, 3), oar.nn.ReLU()).eval()
        oar.jit.trace(m, oar.ones(2, 3), check_inputs=[oar.randn(5, 3), (oar.randn(1, 3),)])

    class Noisy(oar.nn.Module):
        def forward(self, x):
            return x * oar.rand_like(x)

    with pytest.warns(oar.jit.TracerWarning, match=r"Output nr 1\."):
        oar.jit.trace(Noisy(), oar.ones(2), check_inputs=[oar.ones(3)])


def test_is_tracing_and_errors_as_torch_words_them(torch):
    seen = []

    def f(x):
        seen.append(oar.jit.is_tracing())
        return x + 1

    oar.jit.trace(f, oar.ones(2), check_trace=False)
    assert seen == [True] and not oar.jit.is_tracing() and not oar.jit.is_scripting()

    def bad_out(x):
        return 3

    for fn, args in ((bad_out, (torch.ones(2),)), (lambda x: x, ((3,),))):
        with pytest.raises(RuntimeError) as want:
            torch.jit.trace(fn, *args)
        oargs = tuple(oar.ones(2) if hasattr(a, "shape") else a for a in args)
        with pytest.raises(RuntimeError) as got:
            oar.jit.trace(fn, *oargs)
        assert str(got.value) == str(want.value)

    def as_list(x):
        return [x * 2]

    with pytest.warns(oar.jit.TracerWarning, match="Encountering a list at the output of the tracer"):
        tl = oar.jit.trace(as_list, oar.ones(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        oar.jit.trace(as_list, oar.ones(2), strict=False)
    with oar.no_grad():
        assert isinstance(tl(oar.ones(2)), list)
    with pytest.raises(AttributeError, match="expected torch.nn.Module as the first argument"):
        oar.jit.trace_module(as_list, {"forward": oar.ones(2)})
    with pytest.raises(AttributeError, match=r"expected a dictionary of \(method_name, input\) pairs"):
        oar.jit.trace_module(oar.nn.Linear(2, 2), oar.ones(2))


def test_trace_module_other_methods():
    class Two(oar.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = oar.nn.Linear(3, 3)

        def forward(self, x):
            return self.fc(x)

        def twice(self, x):
            return self.fc(self.fc(x))

    m = Two()
    x = oar.randn(2, 3)
    tm = oar.jit.trace_module(m, {"forward": x, "twice": x})
    with oar.no_grad():
        np.testing.assert_allclose(tm.twice(x).numpy(), m.twice(x).numpy(), rtol=1e-6)
        np.testing.assert_allclose(tm(x).numpy(), m(x).numpy(), rtol=1e-6)
    assert "linear" in tm.twice.code


class Gate(oar.nn.Module):
    """Data-dependent control flow (a loop whose trip count the data decides) beside an exported method."""

    def __init__(self):
        super().__init__()
        self.fc = oar.nn.Linear(4, 4)

    def forward(self, x, steps: int = 2):
        for _ in range(steps):
            x = self.fc(x)
        return x

    @oar.jit.export
    def shrink(self, x):
        while x.abs().max() > 1:
            x = x / 2
        return x

    @oar.jit.ignore
    def helper(self):
        return "python"

    @oar.jit.unused
    def unused_path(self, x):
        return x


def test_script_compiles_when_it_can_and_falls_back_to_eager():
    m = Gate()
    s = oar.jit.script(m)
    assert isinstance(s, oar.jit.RecursiveScriptModule) and isinstance(s, oar.jit.ScriptModule)
    x = oar.randn(3, 4) * 10
    with oar.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")  # falling back is script's documented behaviour: no warning
        for steps in (1, 3):  # a constant argument is part of the signature
            np.testing.assert_array_equal(s(x, steps).numpy(), m(x, steps).numpy())
        np.testing.assert_array_equal(s(x, steps=3).numpy(), m(x, 3).numpy())
        np.testing.assert_array_equal(s.shrink(x).numpy(), m.shrink(x).numpy())
    assert "linear" in s.code  # forward compiled
    with pytest.raises(RuntimeError, match="runs eagerly"):
        s.shrink.code  # the data-dependent loop could not be
    assert s.helper() == "python"
    assert Gate.shrink._torchscript_modifier == "export" and Gate.helper._torchscript_modifier == "ignore"
    assert Gate.unused_path._torchscript_modifier == "unused"

    @oar.jit.script
    def clip(x, limit: float = 1.0):
        return x.clamp(-limit, limit) * 2

    with oar.no_grad():
        np.testing.assert_array_equal(clip(x, 0.5).numpy(), (x.clamp(-0.5, 0.5) * 2).numpy())
    assert isinstance(clip, oar.jit.ScriptFunction) and oar.jit.script(clip) is clip
    with pytest.warns(FutureWarning):
        dropped = oar.jit.ignore(drop=True)(lambda: 1)
    assert dropped._torchscript_modifier == "unused"
    with pytest.raises(RuntimeError, match="must be a bool or a function"):
        oar.jit.ignore(3)


def test_freeze_and_optimize_for_inference(torch):
    tm, om, shape, _ = twin(torch, "cnn")
    x = oar.tensor(np.random.randn(*shape).astype(np.float32))
    traced = oar.jit.trace(om, x)
    with pytest.raises(RuntimeError) as want:
        torch.jit.freeze(tm)
    with pytest.raises(RuntimeError) as got:
        oar.jit.freeze(om)
    assert str(got.value) == str(want.value)
    traced.train()
    with pytest.raises(RuntimeError, match="only implemented for modules in eval mode"):
        oar.jit.freeze(traced)
    traced.eval()
    frozen = oar.jit.freeze(traced)
    assert isinstance(frozen, oar.jit.RecursiveScriptModule)
    with oar.no_grad():
        expected = om(x).numpy()
    out = frozen(x)  # grad mode on: a frozen module needs no gradient, so it runs its program
    assert not out.requires_grad
    np.testing.assert_allclose(out.numpy(), expected, rtol=RTOL, atol=ATOL)
    with oar.no_grad():
        om.head.bias.add_(5.0)  # the original changes; the frozen copy keeps its constants
    np.testing.assert_allclose(frozen(x).numpy(), expected, rtol=RTOL, atol=ATOL)
    opt = oar.jit.optimize_for_inference(oar.jit.trace(om.eval(), x))
    with oar.no_grad():
        np.testing.assert_allclose(opt(x).numpy(), om(x).numpy(), rtol=RTOL, atol=ATOL)
    assert "conv2d" in opt.code and "batch_norm" not in opt.code  # folded into the convolutions
    assert oar.jit.optimize_for_inference(opt) is opt


LOADER = r"""
import sys
import numpy as np
import oar as torch
m = torch.jit.load(sys.argv[1], map_location="cpu")
outs = []
for path in sys.argv[2:]:
    out = m(torch.tensor(np.load(path)))
    flat = []
    def walk(o):
        if isinstance(o, (tuple, list)):
            for v in o:
                walk(v)
        else:
            flat.append(o.numpy())
    walk(out)
    kinds = type(out).__name__ + (type(out[1]).__name__ if isinstance(out, tuple) else "")
    np.savez(path + ".out.npz", *flat, kinds=np.array(kinds))
print(type(m).__name__, m.original_name)
"""


@pytest.mark.parametrize("name", MODELS)
def test_save_load_in_another_process(torch, tmp_path, name):
    tm, om, shape, other = twin(torch, name)
    x = np.random.randn(*shape).astype(np.float32)
    x2 = np.random.randn(*other).astype(np.float32)
    ot = oar.jit.trace(om, oar.tensor(x))
    path = tmp_path / f"{name}.pt"
    oar.jit.save(ot, str(path))
    assert zipfile.is_zipfile(path) and sorted(os.listdir(tmp_path)) == [f"{name}.pt"]
    inputs = []
    for i, xi in enumerate((x, x2)):
        np.save(tmp_path / f"x{i}.npy", xi)
        inputs.append(str(tmp_path / f"x{i}.npy"))
    pkg = os.path.dirname(os.path.dirname(oar.__file__))
    r = subprocess.run([sys.executable, "-c", LOADER, str(path)] + inputs, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": pkg}, cwd=str(tmp_path), timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["LoadedModule", type(om).__name__]
    for i, xi in enumerate((x, x2)):  # the traced batch and another: the batch stays dynamic
        saved = np.load(inputs[i] + ".out.npz")
        want = tt_out = tm(torch.tensor(xi))
        kinds = type(want).__name__ + (type(want[1]).__name__ if isinstance(want, tuple) else "")
        assert str(saved["kinds"]) == kinds  # the nesting of the outputs survives the file
        for k, w in enumerate(flat_np(tt_out)):
            np.testing.assert_allclose(saved[f"arr_{k}"], w, rtol=RTOL, atol=ATOL)


def test_load_file_objects_and_bad_files(torch, tmp_path):
    m = oar.nn.Linear(3, 2).eval()
    x = oar.randn(4, 3)
    traced = oar.jit.trace(m, x)
    buf = io.BytesIO()
    oar.jit.save(traced, buf)
    buf.seek(0)
    loaded = oar.jit.load(buf, map_location=oar.device("cpu"))
    with oar.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(loaded(x).numpy(), want, rtol=1e-6)
    again = io.BytesIO()
    oar.jit.save(loaded, again)  # a loaded model saves again as it was
    again.seek(0)
    np.testing.assert_allclose(oar.jit.load(again)(x).numpy(), want, rtol=1e-6)
    loaded.train()
    with pytest.raises(RuntimeError, match=r"call \.eval\(\)"):
        loaded(x)
    with pytest.raises(ValueError) as got:
        oar.jit.load(str(tmp_path / "nope.pt"))
    with pytest.raises(ValueError) as want:
        torch.jit.load(str(tmp_path / "nope.pt"))
    assert str(got.value) == str(want.value)
    with pytest.raises(ValueError, match="map_location should be either None, string or torch.device"):
        oar.jit.load(buf, map_location=5)
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a model at all")
    with pytest.raises(RuntimeError, match="is not a model saved by torch.jit.save"):
        oar.jit.load(str(junk))
    other_zip = tmp_path / "other.pt"
    with zipfile.ZipFile(other_zip, "w") as z:
        z.writestr("model.json", "{}")
    with pytest.raises(RuntimeError, match="without model.safetensors, jit.json"):
        oar.jit.load(str(other_zip))
    ts = tmp_path / "torchscript.pt"
    torch.jit.save(torch.jit.trace(torch.nn.Linear(3, 2), torch.ones(1, 3)), str(ts))
    with pytest.raises(RuntimeError, match="TorchScript archive written by PyTorch"):
        oar.jit.load(str(ts))
    # a broken program inside a well-formed archive: the predictor's own checks speak
    broken = tmp_path / "broken.pt"
    with zipfile.ZipFile(io.BytesIO(again.getvalue())) as src, zipfile.ZipFile(broken, "w") as dst:
        for n in src.namelist():
            data = src.read(n)
            dst.writestr(n, data.replace(b'"linear"', b'"fancy_linear"') if n == "model.json" else data)
    with pytest.raises(RuntimeError, match="fancy_linear"):
        oar.jit.load(str(broken))


def test_save_is_atomic_and_refuses_what_it_cannot_save(tmp_path):
    m = oar.nn.Linear(3, 2).eval()
    path = tmp_path / "m.pt"
    oar.jit.save(oar.jit.trace(m, oar.randn(2, 3)), str(path))
    before = path.read_bytes()

    def branchy(x):
        return x if x.sum() > 0 else -x

    with pytest.warns(oar.jit.TracerWarning):
        eager_only = oar.jit.trace(branchy, oar.ones(2))
    with pytest.raises(RuntimeError, match="cannot be saved as a program: it reads a tensor's value"):
        oar.jit.save(eager_only, str(path))
    bn = oar.jit.trace(oar.nn.BatchNorm1d(3), oar.randn(4, 3))  # train mode: updates state
    with pytest.raises(RuntimeError, match=r"call \.eval\(\)"):
        oar.jit.save(bn, str(path))
    with pytest.raises(TypeError, match="expected a ScriptModule or ScriptFunction"):
        oar.jit.save(lambda x: x, str(path))
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["m.pt"]  # untouched, no leftovers


def test_fixed_batch_programs_refuse_other_shapes(tmp_path):
    """A program whose sizes cannot vary is saved at its traced shapes; the predictor then refuses others."""
    def pairs(x):
        return x.reshape(2, 2, 3).sum(1)

    tf = oar.jit.trace(pairs, oar.randn(4, 3))
    path = tmp_path / "f.pt"
    oar.jit.save(tf, str(path))
    loaded = oar.jit.load(str(path))
    x = oar.randn(4, 3)
    np.testing.assert_allclose(loaded(x).numpy(), pairs(x).numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="fixed at export"):
        loaded(oar.randn(6, 3))


def test_traced_module_follows_train_and_eval(torch):
    """A traced module's program is keyed by every submodule's mode: .train() traces a training program
    (BatchNorm on batch statistics), never reusing the eval one (torch would keep the traced mode)."""
    tm, om, shape, _ = twin(torch, "cnn")
    x = oar.tensor(np.random.randn(*shape).astype(np.float32))
    ot = oar.jit.trace(om, x)
    with oar.no_grad():
        evaluated = ot(x).numpy()
        ot.train()
        assert om.training and om.bn1.training
        trained = ot(x).numpy()
        om_copy = make_models(oar)["cnn"][0]()
        om_copy.load_state_dict(dict(om.state_dict()))
        om_copy.train()
    assert not np.allclose(evaluated, trained, atol=1e-3)
    with oar.no_grad():
        np.testing.assert_allclose(trained, om_copy(x).numpy(), rtol=RTOL, atol=ATOL)
    ot.eval()
    om.bn1.train()  # one submodule's mode alone changes the signature too
    with oar.no_grad():
        ref = copy.deepcopy(om)
        got, want = ot(x).numpy(), ref(x).numpy()
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    assert not np.allclose(got, evaluated, atol=1e-3)


def test_interrupted_save_leaves_the_old_file(tmp_path, monkeypatch):
    m = oar.nn.Linear(3, 2).eval()
    traced = oar.jit.trace(m, oar.randn(2, 3))
    path = tmp_path / "m.pt"
    oar.jit.save(traced, str(path))
    before = path.read_bytes()
    with oar.no_grad():
        m.weight.add_(1.0)

    def failing_fsync(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="disk full"):
        oar.jit.save(traced, str(path))
    monkeypatch.undo()
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["m.pt"]


def test_map_location_cuda(tmp_path):
    m = oar.nn.Linear(3, 2).eval()
    x = oar.randn(4, 3)
    path = tmp_path / "m.pt"
    oar.jit.save(oar.jit.trace(m, x), str(path))
    if not oar.cuda.is_available():
        with pytest.raises(RuntimeError, match="torch.cuda.is_available\\(\\) is False"):
            oar.jit.load(str(path), map_location="cuda")
        return
    loaded = oar.jit.load(str(path), map_location="cuda")  # the predictor runs on the GPU
    out = loaded(x)
    assert out.device.type == "cuda"
    with oar.no_grad():
        np.testing.assert_allclose(out.cpu().numpy(), m(x).numpy(), rtol=1e-5, atol=1e-6)


def test_deepcopy(tmp_path):
    m = oar.nn.Sequential(oar.nn.Linear(3, 4), oar.nn.ReLU()).eval()
    x = oar.randn(2, 3)
    traced = oar.jit.trace(m, x)
    twin = copy.deepcopy(traced)
    assert type(twin) is type(traced) and all(a is not b for a, b in zip(twin.parameters(), m.parameters()))
    with oar.no_grad():
        want = m(x).numpy()
        np.testing.assert_array_equal(twin(x).numpy(), want)
        m[0].bias.add_(1.0)  # the copy's weights are its own
        np.testing.assert_array_equal(twin(x).numpy(), want)
    path = tmp_path / "m.pt"
    oar.jit.save(twin, str(path))
    loaded = oar.jit.load(str(path))
    other = copy.deepcopy(loaded)  # its own predictor over the same weights
    np.testing.assert_array_equal(other(x).numpy(), want)
    np.testing.assert_array_equal(loaded(x).numpy(), want)


def test_extra_files_and_two_file_exports(torch, tmp_path):
    m = oar.nn.Linear(3, 2).eval()
    x = oar.randn(4, 3)
    with oar.no_grad():
        want = m(x).numpy()
    buf = io.BytesIO()
    oar.jit.save(oar.jit.trace(m, x), buf, _extra_files={"meta.txt": "hello"})
    buf.seek(0)
    extra = {"meta.txt": "", "absent": ""}
    oar.jit.load(buf, _extra_files=extra)
    tbuf = io.BytesIO()
    torch.jit.save(torch.jit.trace(torch.nn.Linear(3, 2), torch.ones(1, 3)), tbuf, _extra_files={"meta.txt": "hello"})
    tbuf.seek(0)
    textra = {"meta.txt": "", "absent": ""}
    torch.jit.load(tbuf, _extra_files=textra)
    assert extra == textra == {"meta.txt": b"hello", "absent": b""}
    # oar.jit.save's two files (Paddle's style, the C predictor's format) load too
    base = tmp_path / "linear"
    oar.jit.save(m, str(base), input_spec=[oar.jit.InputSpec([None, 3])])
    for name in (str(base), str(base) + ".json"):
        np.testing.assert_allclose(oar.jit.load(name)(x).numpy(), want, rtol=1e-6)


def test_saved_script_function_with_a_constant_argument(tmp_path):
    @oar.jit.script
    def scale(x, k: int):
        return x * k + x.shape[0]

    x = oar.randn(3, 2)
    with oar.no_grad():
        scale(x, 4)
    path = tmp_path / "scale.pt"
    oar.jit.save(scale, str(path))
    loaded = oar.jit.load(str(path))
    np.testing.assert_allclose(loaded(x, 4).numpy(), (x * 4 + 3).numpy(), rtol=1e-6)
    x5 = oar.randn(5, 2)  # x.shape[0] was read at tracing: not a size the program can vary, so it is fixed
    with pytest.raises(RuntimeError):
        loaded(x5, 4)
    with pytest.raises(RuntimeError, match="expected inputs shaped as"):
        loaded(x, 5)  # the constant the program was saved with is part of it


def test_replaced_parameters_and_shape_dependent_nesting(torch):
    tm, om, shape, _ = twin(torch, "mlp")
    x = oar.randn(*shape)
    ot = oar.jit.trace(om, x)
    om.fc2 = oar.nn.Linear(16, 3).eval()  # the program bound the old tensors: the new ones need a new trace
    om.fc1.weight = oar.nn.Parameter(oar.randn(16, 6))
    with oar.no_grad():
        np.testing.assert_array_equal(ot(x).numpy(), om(x).numpy())
        ot.double()  # new Parameter objects of another dtype
        xd = x.double()
        np.testing.assert_array_equal(ot(xd).numpy(), om(xd).numpy())

    def pairs_when_wide(x):
        return (x, x * 2) if x.shape[1] > 1 else (x,)

    tf = oar.jit.trace(pairs_when_wide, oar.ones(2, 3))
    with oar.no_grad(), pytest.warns(oar.jit.TracerWarning, match="different nesting of outputs"):
        narrow = tf(oar.ones(2, 1))
    assert isinstance(narrow, tuple) and len(narrow) == 1
    with oar.no_grad():
        assert len(tf(oar.ones(2, 3))) == 2


LAYER = oar.nn.Linear(3, 3)


def uses_global_layer(x):
    return LAYER(x).relu() * 2


def test_functions_find_their_modules():
    """A traced function using a module (global, closure, bound method) names its parameters in the
    program, runs eagerly when they want gradients, and inlines a traced module it calls."""
    x = oar.randn(2, 3)
    traced = oar.jit.trace(uses_global_layer, x)
    assert 'param "weight"' in traced.code
    out = traced(x)  # LAYER's parameters require grad: eager, so backward works
    assert out.requires_grad
    out.sum().backward()
    assert LAYER.weight.grad is not None
    inner = oar.jit.trace(oar.nn.Linear(3, 3).eval(), x)

    def outer(v):
        return inner(v) * 2

    traces = inner._calls["forward"].static.num_traces()
    nested = oar.jit.trace(outer, x)
    assert inner._calls["forward"].static.num_traces() == traces  # its Python ran inside outer's trace
    with oar.no_grad():
        np.testing.assert_allclose(nested(x).numpy(), outer(x).numpy(), rtol=1e-6)
    assert "linear" in nested.code and 'param "weight"' in nested.code  # inlined, named by outer's closure


def legacy_class(t):
    class Legacy(t.jit.ScriptModule):
        """torch's older API: a ScriptModule subclass with script methods."""

        def __init__(self):
            super().__init__()
            self.fc = t.nn.Linear(4, 2)

        @t.jit.script_method
        def forward(self, x):
            return t.relu(self.fc(x)) * 2

    return Legacy


def test_script_module_subclass_with_script_methods(torch, tmp_path):
    torch.manual_seed(0)
    tm = legacy_class(torch)().eval()
    om = legacy_class(oar)().eval()
    om.load_state_dict({k: oar.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = np.random.randn(3, 4).astype(np.float32)
    with oar.no_grad():
        got = om(oar.tensor(x)).numpy()
    np.testing.assert_allclose(got, tm(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert "linear" in om.code and isinstance(om, oar.jit.ScriptModule)
    assert oar.jit.script(om) is om
    path = tmp_path / "legacy.pt"
    oar.jit.save(om, str(path))
    loaded = oar.jit.load(str(path))
    assert loaded.original_name == "Legacy"
    np.testing.assert_allclose(loaded(oar.tensor(x)).numpy(), got, rtol=1e-6)
    frozen = oar.jit.freeze(om)
    out = frozen(oar.tensor(x))
    assert not out.requires_grad and frozen.fc.weight is not om.fc.weight
    np.testing.assert_allclose(out.numpy(), got, rtol=1e-6)
    out = om(oar.tensor(x))  # gradients wanted: eager, so they flow
    out.sum().backward()
    assert om.fc.weight.grad is not None


def test_threads_share_a_traced_function():
    """Calls from several threads at once, with traces happening meanwhile (more shapes than the cache
    keeps) and two nestings of the inputs: each call must rebuild its own arguments."""
    import threading

    def f(a):
        return a * 2 if isinstance(a, oar.Tensor) else a[0] - a[1]

    traced = oar.jit.trace(f, oar.randn(3, 2))
    cases = [oar.randn(b, 2) for b in range(1, 13)]
    cases += [(oar.randn(b, 2), oar.randn(b, 2)) for b in range(1, 13)]
    with oar.no_grad():
        want = [f(c).numpy() for c in cases]
    errors = []

    def worker(k):
        try:
            with oar.no_grad():
                for _ in range(3):
                    for i in range(len(cases)):
                        j = (i * 7 + k) % len(cases)
                        np.testing.assert_array_equal(traced(cases[j]).numpy(), want[j])
        except Exception as exc:  # reported below
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, inside a call too
    try:
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors[0]
