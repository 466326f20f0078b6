"""state_dict / load_state_dict of converted (quantized) models, beside torch 1.13: torch's keys and
value kinds; a converted oar model loads another's state and gives its bits; oar.save / oar.load
keep quantized weights bit for bit under documented keys; torch's converted state, moved over
tensor by tensor (int_repr, q_scale / q_per_channel_scales), makes an oar model give torch's
output within the flow test's tolerance; bad checkpoints get torch-style errors."""
import io
import json
import struct

import pytest

import oar
from conftest import np
from test_torch_quantization import _flow, _small_model, _t, _torch_quant

OQ = oar.ao.quantization


def _qconfig(Q, per_channel):
    return Q.QConfig(activation=Q.default_observer,
                     weight=Q.default_per_channel_weight_observer if per_channel else Q.default_weight_observer)


def _converted(seed, per_channel, calib_scale=1.0):
    """the small model of test_torch_quantization through oar's flow (seeded weights, a calibration batch
    scaled by calib_scale: another seed or scale gives other weights and other observed ranges)"""
    oar.manual_seed(seed)
    rng = np.random.default_rng(seed)
    calib, x = (oar.from_numpy(rng.standard_normal((4, 3, 16, 16)).astype(np.float32)) for _ in range(2))
    model, _ = _flow(oar, _small_model(oar), _qconfig(OQ, per_channel), calib * calib_scale, x)
    return model


def _describe(value):
    """(kind, shape, dtype, qscheme) of a state_dict value, for oar's and torch's alike"""
    if isinstance(value, (tuple, list)):
        return ("tuple", tuple(_describe(v) for v in value))
    if value is None:
        return ("none",)
    if not hasattr(value, "shape"):
        return ("dtype", str(value).split(".")[-1])
    if getattr(value, "is_quantized", False):
        return ("quantized", tuple(value.shape), str(value.dtype).split(".")[-1], str(value.qscheme()).split(".")[-1])
    return ("tensor", tuple(value.shape), str(value.dtype).split(".")[-1])


def _from_torch(torch, value):
    """a torch state_dict value as a user moves it to oar: codes and their scales for quantized tensors"""
    if isinstance(value, (tuple, list)):
        return type(value)(_from_torch(torch, v) for v in value)
    if value is None:
        return None
    if isinstance(value, torch.dtype):
        return getattr(oar, str(value).split(".")[-1])
    codes = lambda t: oar.from_numpy(t.int_repr().numpy().copy())
    if value.is_quantized and value.qscheme() == torch.per_tensor_affine:
        return oar._make_per_tensor_quantized_tensor(codes(value), value.q_scale(), value.q_zero_point())
    if value.is_quantized:
        scales, zero_points = value.q_per_channel_scales().numpy(), value.q_per_channel_zero_points().numpy()
        return oar._make_per_channel_quantized_tensor(codes(value), oar.from_numpy(scales),
                                                      oar.from_numpy(zero_points), value.q_per_channel_axis())
    return oar.from_numpy(value.detach().numpy().copy())


def _unfused(lib):
    """a BatchNorm left unfused and the quantized activations, whose state torch keeps (LeakyReLU) or not"""
    nn, Q = lib.nn, lib.ao.quantization
    return nn.Sequential(Q.QuantStub(), nn.Conv2d(3, 4, 3, dilation=2), nn.BatchNorm2d(4), nn.LeakyReLU(0.1),
                         nn.Hardswish(), nn.ELU(), nn.ReLU6(), Q.DeQuantStub()).eval()


def _converted_pair(model):
    """(torch's, oar's) converted model from the same float layers, flow and calibration batch (onednn,
    per-channel weights)"""
    torch = _torch_quant()
    if "onednn" not in torch.backends.quantized.supported_engines:
        pytest.skip("torch here has no onednn engine")
    torch.backends.quantized.engine = "onednn"
    torch.manual_seed(0)
    x = np.random.default_rng(0).standard_normal((4, 3, 16, 16)).astype(np.float32)
    converted = []
    for lib in (torch, oar):
        m = _small_model(lib) if model == "small" else _unfused(lib)
        m.eval()
        if model == "small":
            m.fuse_model()
        m.qconfig = _qconfig(lib.ao.quantization, True)
        lib.ao.quantization.prepare(m, inplace=True)
        with lib.no_grad():
            m(lib.from_numpy(x))
        converted.append(lib.ao.quantization.convert(m))
    return converted


@pytest.mark.parametrize("model", ["small", "unfused"])
def test_converted_state_dict_has_torchs_keys(model):
    """the same keys in the same order, each value of the same kind, shape, dtype and qscheme as torch's (onednn,
    per-channel weights: its bias-free conv keeps bias None, as oar's; qnnpack would give it zeros)"""
    state = [m.state_dict() for m in _converted_pair(model)]
    theirs, ours = state
    assert list(ours) == list(theirs)
    for k in theirs:
        assert _describe(ours[k]) == _describe(theirs[k]), k


def _repr_shape(module):
    """a model's repr with its numbers and library prefix blanked: the observed scales differ in their last
    digits between the libraries' observers, the layout must not"""
    import re
    return re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "#", repr(module).replace("oar.", "torch."))


@pytest.mark.parametrize("model", ["small", "unfused"])
def test_converted_model_prints_as_torchs(model):
    """QuantizedConvReLU2d(...), QuantizedLinear(...), QuantizedBatchNorm2d(...), QuantizedDropout(...): torch's
    names, and its arguments in its order (a bias-free conv says so; default padding is left out)"""
    theirs, ours = (_repr_shape(m) for m in _converted_pair(model))
    assert ours == theirs


def test_dynamic_model_prints_as_torchs():
    torch = _torch_quant()
    models = []
    for lib in (torch, oar):
        float_model = lib.nn.Sequential(lib.nn.Linear(4, 3), lib.nn.ReLU(), lib.nn.Linear(3, 2, bias=False))
        models.append(lib.ao.quantization.quantize_dynamic(float_model, {lib.nn.Linear}))
    theirs, ours = (_repr_shape(m) for m in models)
    assert "DynamicQuantizedLinear" in ours and ours == theirs


@pytest.mark.parametrize("per_channel", [False, True])
def test_state_dict_moves_between_converted_models(per_channel):
    """another converted model (other weights, other observed ranges; per-tensor weights where the source has
    per-channel ones and the reverse) gives the source's bits once it has loaded its state_dict. Hardswish keeps
    its output scale out of the state_dict, as torch's does: it is copied by hand."""
    src, dst = _converted(1, per_channel), _converted(2, not per_channel, calib_scale=3.0)
    x = oar.from_numpy(np.random.default_rng(5).standard_normal((2, 3, 16, 16)).astype(np.float32))
    assert not np.array_equal(src(x).numpy(), dst(x).numpy())
    dst.act.scale, dst.act.zero_point = src.act.scale, src.act.zero_point
    sd = src.state_dict()
    keys = list(sd)
    result = dst.load_state_dict(sd)
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert list(sd) == keys, "load_state_dict took keys out of the caller's dict"
    np.testing.assert_array_equal(dst(x).numpy(), src(x).numpy())
    assert dst.fc2._qweight.qscheme() == src.fc2._qweight.qscheme()


def _header(raw):
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n])


def test_save_load_round_trip_bit_for_bit(tmp_path):
    """oar.save / oar.load of a converted model's state: every quantized weight's codes, scales and zero points
    come back with the same bits, the structure (tuples, None, the packed dtype) too, and a third model loading
    the file gives the source's output. The file holds the codes and scales under the documented keys."""
    src = _converted(3, True)
    sd = src.state_dict()
    path = tmp_path / "q.safetensors"
    oar.save(sd, path)
    raw = path.read_bytes()
    header = _header(raw)
    for key in ("stem.0.weight", "stem.0.weight.q_per_channel_scales", "stem.0.weight.q_per_channel_zero_points",
                "fc2._packed_params._packed_params.0", "fc2._packed_params._packed_params.1",
                "fc2._packed_params._packed_params.0.q_per_channel_scales"):
        assert key in header, f"{key} missing from the file's tensors: {sorted(header)[:12]}"
    assert header["stem.0.weight"]["dtype"] == "I8"
    back = oar.load(path)
    assert list(back) == list(sd)
    for k, v in sd.items():
        assert _describe(back[k]) == _describe(v), k
    for k in ("stem.0.weight", "branch.weight"):
        a, b = sd[k], back[k]
        np.testing.assert_array_equal(b.int_repr().numpy(), a.int_repr().numpy())
        np.testing.assert_array_equal(b.q_per_channel_scales().numpy().view(np.int64),
                                      a.q_per_channel_scales().numpy().view(np.int64))
        assert b.q_per_channel_axis() == a.q_per_channel_axis()
    w, b = back["fc2._packed_params._packed_params"]
    np.testing.assert_array_equal(w.int_repr().numpy(), src.fc2.weight().int_repr().numpy())
    np.testing.assert_array_equal(b.numpy().view(np.int32), src.fc2.bias().numpy().view(np.int32))
    assert back["side.bias"] is None and back["fc2._packed_params.dtype"] is oar.qint8
    dst = _converted(4, False, calib_scale=0.5)
    dst.act.scale, dst.act.zero_point = src.act.scale, src.act.zero_point
    dst.load_state_dict(back)
    x = oar.from_numpy(np.random.default_rng(6).standard_normal((2, 3, 16, 16)).astype(np.float32))
    np.testing.assert_array_equal(dst(x).numpy(), src(x).numpy())
    # a per-tensor quantized tensor alone, and a file object
    q = oar.quantize_per_tensor(oar.randn(3, 4), 0.05, 3, oar.quint8)
    f = io.BytesIO()
    oar.save(q, f)
    f.seek(0)
    got = oar.load(f)
    np.testing.assert_array_equal(got.int_repr().numpy(), q.int_repr().numpy())
    assert (got.q_scale(), got.q_zero_point(), got.dtype) == (q.q_scale(), q.q_zero_point(), oar.quint8)


@pytest.mark.parametrize("engine", ["qnnpack", "onednn"])
def test_torch_state_dict_loads_into_oar(engine):
    """torch's converted model's state_dict, moved tensor by tensor, into an oar model of the same architecture
    converted on other data: torch's output within the flow test's tolerance (2 output steps), the weights'
    codes equal torch's."""
    torch = _torch_quant()
    if engine not in torch.backends.quantized.supported_engines:
        pytest.skip(f"torch here has no {engine} engine")
    torch.backends.quantized.engine = engine
    per_channel = engine == "onednn"
    torch.manual_seed(6)  # test_small_model_flow_matches_torch's model and data, where its tolerance was measured
    rng = np.random.default_rng(7)
    calib, x = (rng.standard_normal((8, 3, 16, 16)).astype(np.float32) for _ in range(2))
    tm, ty = _flow(torch, _small_model(torch), _qconfig(torch.ao.quantization, per_channel), _t(torch, calib),
                   _t(torch, x))
    om = _converted(14, not per_channel, calib_scale=2.0)
    om.act.scale, om.act.zero_point = tm.act.scale, tm.act.zero_point  # not in either state_dict
    om.load_state_dict({k: _from_torch(torch, v) for k, v in tm.state_dict().items()})
    np.testing.assert_array_equal(om.branch.weight().int_repr().numpy(), tm.branch.weight().int_repr().numpy())
    np.testing.assert_array_equal(om.fc1[0].weight().int_repr().numpy(), tm.fc1[0].weight().int_repr().numpy())
    assert (om.fc2.scale, om.fc2.zero_point) == (pytest.approx(tm.fc2.scale, rel=1e-7), tm.fc2.zero_point)
    with oar.no_grad():
        oy = om(oar.from_numpy(x)).numpy()
    step = tm.fc2.scale
    err = np.abs(oy - ty.numpy()).max()
    assert err <= 2 * step + 1e-6, f"output: max |oar - torch| = {err:.3g}, {err / step:.1f} output steps"


def _error(model, sd):
    with pytest.raises(RuntimeError) as e:
        model.load_state_dict(sd)
    return str(e.value)


def test_load_state_dict_errors():
    """what a bad checkpoint gets: the keys missing or unexpected, shapes, float weights where quantized ones
    belong, weights oar's int8 kernels cannot run (an axis other than the output channels, zero points away
    from 0, quint8), another packed dtype; each names the key and what was expected"""
    m = _converted(7, True)
    good = m.state_dict()
    before = m(oar.ones(1, 3, 16, 16)).numpy()

    sd = dict(good)
    del sd["branch.scale"]
    sd["branch.extra"] = oar.ones(1)
    msg = _error(m, sd)
    assert 'Missing key(s) in state_dict: "branch.scale"' in msg
    assert 'Unexpected key(s) in state_dict: "branch.extra"' in msg
    sd = dict(good)
    sd["fc2._packed_params.stray"] = oar.ones(1)
    assert 'Unexpected key(s) in state_dict: "fc2._packed_params.stray"' in _error(m, sd)

    w = good["branch.weight"]
    sd = dict(good, **{"branch.weight": oar.quantize_per_tensor(oar.randn(8, 8, 3, 3), 0.1, 0, oar.qint8)})
    assert "size mismatch for branch.weight: copying a param with shape (8, 8, 3, 3)" in _error(m, sd)
    sd = dict(good, **{"branch.weight": w.dequantize()})
    assert 'expected a quantized tensor (torch.qint8' in _error(m, sd)
    sd = dict(good, **{"branch.weight": oar.quantize_per_channel(w.dequantize(), oar.full((4,), 0.01),
                                                                 oar.zeros(4, dtype=oar.int64), 1, oar.qint8)})
    assert "qscheme mismatch for branch.weight" in _error(m, sd) and "axis 1" in _error(m, sd)
    sd = dict(good, **{"branch.weight": oar.quantize_per_tensor(w.dequantize(), 0.01, 3, oar.qint8)})
    assert "symmetric weights (zero point 0)" in _error(m, sd)
    sd = dict(good, **{"branch.weight": oar.quantize_per_tensor(w.dequantize(), 0.01, 128, oar.quint8)})
    assert "dtype mismatch for branch.weight" in _error(m, sd)
    sd = dict(good, **{"branch.bias": oar.zeros(5)})
    assert "size mismatch for branch.bias" in _error(m, sd)
    sd = dict(good, **{"fc2._packed_params.dtype": oar.float16})
    assert "float16 dynamic quantization is not offered" in _error(m, sd)
    sd = dict(good, **{"fc2._packed_params._packed_params": good["fc2._packed_params._packed_params"][0]})
    assert "expected a (weight, bias) pair" in _error(m, sd)
    sd = dict(good, **{"fc2.scale": oar.ones(3)})
    assert 'the parameter named "fc2.scale", expected one value' in _error(m, sd)
    # nothing half-loaded by the refusals above: the model still gives its own output
    np.testing.assert_array_equal(m(oar.ones(1, 3, 16, 16)).numpy(), before)
    # a float model's state into the converted one: every quantized key missing, every float one unexpected
    float_sd = _small_model(oar).state_dict()
    msg = _error(m, float_sd)
    assert '"stem.0.scale"' in msg and 'Unexpected key(s) in state_dict: "stem.0.weight"' not in msg
    assert "stem.1.running_mean" in msg
