"""torch.onnx.export on oar (oar.onnx.export: the model traced by oar's compiler, written by oar's
ONNX exporter): the files pass onnx.checker's full check and, run by `oar infer` (the build's
CLI), give the model's eager outputs, at the traced batch and, with dynamic_axes, at another;
file objects, names and the refusals."""
import io
import os
import subprocess

import numpy as np
import pytest

import oar

onnx = pytest.importorskip("onnx", reason="onnx is absent (apt-get install python3-onnx)")


def cli():
    path = os.path.join(os.path.dirname(oar.__file__), "..", "..", "oar")
    if not os.access(path, os.X_OK):
        pytest.skip("the oar command is not beside this build's python package")
    return path


class Net(oar.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = oar.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = oar.nn.BatchNorm2d(8)
        self.norm = oar.nn.LayerNorm(8)
        self.head = oar.nn.Linear(8, 5)

    def forward(self, x):
        h = oar.relu(self.bn(self.conv(x)))           # [B, 8, H, W]
        h = self.norm(h.flatten(2).transpose(1, 2))   # [B, H*W, 8]
        return self.head(oar.asinh(h).mean(1)), h.amax(1)


def run_cli(tmp_path, path, x):
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    r = subprocess.run([cli(), "infer", str(path), "--input", str(tmp_path / "x.npy"), "--outputs", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return [np.load(out / f"output_{k}.npy") for k in range(2)]


def test_export_runs_with_the_models_outputs(tmp_path):
    model = Net()
    with oar.no_grad():  # statistics as a trained model has
        model.bn.running_mean.copy_(oar.randn(8) * 0.1)
        model.bn.running_var.copy_(oar.rand(8) + 0.5)
    x = oar.randn(2, 3, 6, 6)
    path = tmp_path / "net.onnx"
    oar.onnx.export(model, (x,), str(path), input_names=["image"], output_names=["logits", "peak"],
                    dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
    assert model.training  # restored after the export in eval mode
    m = onnx.load(str(path))
    onnx.checker.check_model(m, full_check=True)
    assert [i.name for i in m.graph.input] == ["image"] and [o.name for o in m.graph.output] == ["logits", "peak"]
    assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    model.eval()
    for batch in (2, 5):  # the traced batch, and another through the dynamic dim
        xb = oar.randn(batch, 3, 6, 6)
        with oar.no_grad():
            want = [t.numpy() for t in model(xb)]
        got = run_cli(tmp_path, path, xb.numpy())
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_export_to_a_file_object_and_default_names(tmp_path):
    model = oar.nn.Sequential(oar.nn.Linear(4, 3), oar.nn.GELU())
    buf = io.BytesIO()
    oar.onnx.export(model, oar.randn(2, 4), buf)
    m = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(m, full_check=True)
    assert [i.name for i in m.graph.input] == ["input0"] and [o.name for o in m.graph.output] == ["output0"]
    assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 2  # no dynamic_axes: fixed


def test_export_refusals(tmp_path):
    model = oar.nn.Linear(4, 3)
    x = oar.randn(2, 4)
    with pytest.raises(ValueError, match="opset 17"):
        oar.onnx.export(model, x, str(tmp_path / "a.onnx"), opset_version=11)
    with pytest.raises(ValueError, match="neither input_names nor output_names"):
        oar.onnx.export(model, x, str(tmp_path / "a.onnx"), dynamic_axes={"x": [0]})
    with pytest.raises(ValueError, match="inference programs"):
        oar.onnx.export(model, x, str(tmp_path / "a.onnx"), training=oar.onnx.TrainingMode.TRAINING)
    with pytest.raises(TypeError, match="tensors only"):
        oar.onnx.export(lambda a, k: a * k, (x, 2.0), str(tmp_path / "a.onnx"))
    with pytest.raises(RuntimeError, match="no ONNX mapping|supported"):  # a loss has no ONNX form in oar
        oar.onnx.export(lambda a: oar.nn.functional.mse_loss(a, a * 2), x, str(tmp_path / "b.onnx"))
    assert not (tmp_path / "a.onnx").exists() and not (tmp_path / "b.onnx").exists()


def test_torch_switch_exports(tmp_path):
    with oar.mock_torch():
        import torch

        assert torch.onnx.export is oar.onnx.export
        torch.onnx.export(torch.nn.Linear(4, 2), torch.randn(1, 4), str(tmp_path / "m.onnx"))
    onnx.checker.check_model(onnx.load(str(tmp_path / "m.onnx")), full_check=True)
