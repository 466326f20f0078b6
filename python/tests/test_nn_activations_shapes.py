"""The activations, shape functions, paddings, channel dropouts and power pooling of oar.nn (issue 14),
table-driven beside torch 1.13: the same call on both libraries from the same arrays; values must
agree, and for differentiable cases the input gradient of sum(out * g). Modules are built on both
sides with the same arguments and their reprs compared. Random layers are checked in eval mode
against torch and by their statistics in training."""
import numpy as np
import pytest

import oar

R = np.random.default_rng(14)


def f32(*shape):
    return R.standard_normal(shape).astype(np.float32)


def pos(*shape):
    return (R.random(shape) + 0.2).astype(np.float32)


# away from the kinks (+-0.5, +-1, the threshold 0.1), where finite differences are undefined
KINKS = np.array([[-2.0, -0.7, -0.3, 0.05, 0.3, 0.7, 1.5, 3.0], [-4.0, -1.2, -0.45, -0.02, 0.2, 0.45, 0.9, 2.5]],
                 np.float32)

# name -> (inputs, call(lib, *tensors), differentiable)
CASES = {
    "selu": ([f32(3, 5)], lambda L, x: L.nn.functional.selu(x), True),
    "celu": ([f32(3, 5) * 2], lambda L, x: L.nn.functional.celu(x, alpha=0.7), True),
    "celu_default": ([f32(3, 5)], lambda L, x: L.nn.functional.celu(x), True),
    "softsign": ([f32(3, 5) * 3], lambda L, x: L.nn.functional.softsign(x), True),
    "softshrink": ([KINKS], lambda L, x: L.nn.functional.softshrink(x), True),
    "softshrink_lambd": ([KINKS], lambda L, x: L.nn.functional.softshrink(x, 1.0), True),
    "hardshrink": ([KINKS], lambda L, x: L.nn.functional.hardshrink(x), True),
    "hardshrink_lambd": ([KINKS], lambda L, x: L.nn.functional.hardshrink(x, lambd=0.25), True),
    "tanhshrink": ([f32(3, 5)], lambda L, x: L.nn.functional.tanhshrink(x), True),
    "threshold": ([KINKS], lambda L, x: L.nn.functional.threshold(x, 0.1, -3.0), True),
    "logsigmoid_module": ([f32(3, 5) * 4], lambda L, x: L.nn.LogSigmoid()(x), True),
    "softmin": ([f32(3, 5)], lambda L, x: L.nn.Softmin(dim=1)(x), True),
    "softmin_f": ([f32(2, 3, 4)], lambda L, x: L.nn.functional.softmin(x, 0), True),
    "softmax2d": ([f32(2, 3, 4, 5)], lambda L, x: L.nn.Softmax2d()(x), True),
    "softmax2d_unbatched": ([f32(3, 4, 5)], lambda L, x: L.nn.Softmax2d()(x), True),
    "rrelu_eval": ([f32(3, 5)], lambda L, x: L.nn.functional.rrelu(x), True),
    "rrelu_eval_bounds": ([f32(3, 5)], lambda L, x: L.nn.functional.rrelu(x, 0.2, 0.6), True),
    "rrelu_module_eval": ([f32(3, 5)], lambda L, x: L.nn.RReLU(0.1, 0.3).eval()(x), True),
    "selu_module": ([f32(4)], lambda L, x: L.nn.SELU()(x), True),
    "celu_module": ([f32(4)], lambda L, x: L.nn.CELU(2.0)(x), True),
    "shrink_modules": ([KINKS], lambda L, x: L.nn.Hardshrink(0.4)(x) + L.nn.Softshrink(0.25)(x), True),
    "softsign_tanhshrink_modules": ([f32(6)], lambda L, x: L.nn.Softsign()(x) * L.nn.Tanhshrink()(x), True),
    "threshold_module": ([KINKS], lambda L, x: L.nn.Threshold(0.1, 20)(x), True),
    # the in-place forms, on a non-leaf so autograd runs through them
    "selu_": ([f32(3, 4)], lambda L, x: L.nn.functional.selu_(x * 1.0), True),
    "celu_": ([f32(3, 4)], lambda L, x: L.nn.functional.celu_(x * 1.0, 0.5), True),
    "elu_": ([f32(3, 4)], lambda L, x: L.nn.functional.elu_(x * 1.0, 0.3), True),
    "leaky_relu_": ([f32(3, 4)], lambda L, x: L.nn.functional.leaky_relu_(x * 1.0, 0.2), True),
    "hardtanh_": ([KINKS], lambda L, x: L.nn.functional.hardtanh_(x * 1.0, -0.6, 0.8), True),
    "threshold_": ([KINKS], lambda L, x: L.nn.functional.threshold_(x * 1.0, 0.1, 7.0), True),
    "rrelu_": ([f32(3, 4)], lambda L, x: L.nn.functional.rrelu_(x * 1.0), True),
    "inplace_modules": ([f32(3, 4)], lambda L, x: L.nn.SELU(inplace=True)(x * 1.0) + L.nn.CELU(inplace=True)(x * 2.0),
                        True),
    # shapes
    "pixel_shuffle": ([f32(2, 12, 3, 4)], lambda L, x: L.nn.functional.pixel_shuffle(x, 2), True),
    "pixel_shuffle_lead": ([f32(2, 2, 18, 2, 3)], lambda L, x: L.nn.PixelShuffle(3)(x), True),
    "pixel_unshuffle": ([f32(2, 3, 4, 6)], lambda L, x: L.nn.functional.pixel_unshuffle(x, 2), True),
    "pixel_unshuffle_unbatched": ([f32(2, 6, 9)], lambda L, x: L.nn.PixelUnshuffle(3)(x), True),
    "pixel_roundtrip": ([f32(1, 8, 2, 2)], lambda L, x: L.nn.functional.pixel_unshuffle(
        L.nn.functional.pixel_shuffle(x, 2), 2), True),
    # torch 1.13 has no channel_shuffle derivative: oar's is checked in test_channel_shuffle_gradient
    "channel_shuffle": ([f32(2, 6, 3, 2)], lambda L, x: L.nn.functional.channel_shuffle(x, 3), False),
    "channel_shuffle_module": ([f32(2, 8, 5)], lambda L, x: L.nn.ChannelShuffle(2)(x), False),
    "upsample_nearest": ([f32(2, 3, 4, 5)], lambda L, x: L.nn.Upsample(scale_factor=2)(x), True),
    "upsample_size": ([f32(2, 3, 4, 5)], lambda L, x: L.nn.Upsample(size=(7, 9))(x), True),
    "upsample_bilinear_mod": ([f32(1, 2, 3, 4)], lambda L, x: L.nn.Upsample(scale_factor=2, mode="bilinear")(x), True),
    "upsampling_nearest2d": ([f32(1, 2, 3, 4)], lambda L, x: L.nn.UpsamplingNearest2d(scale_factor=3)(x), True),
    "upsampling_bilinear2d": ([f32(1, 2, 3, 4)], lambda L, x: L.nn.UpsamplingBilinear2d(size=(5, 7))(x), True),
    "upsample_f": ([f32(1, 2, 3, 4)], lambda L, x: L.nn.functional.upsample(x, scale_factor=2, mode="bilinear",
                                                                           align_corners=False), True),
    "upsample_nearest_f": ([f32(1, 2, 3, 4)], lambda L, x: L.nn.functional.upsample_nearest(x, size=(6, 5)), True),
    "upsample_bilinear_f": ([f32(1, 2, 3, 4)], lambda L, x: L.nn.functional.upsample_bilinear(x, scale_factor=2),
                            True),
    "constant_pad1d": ([f32(2, 3, 4)], lambda L, x: L.nn.ConstantPad1d((1, 2), 3.5)(x), True),
    "constant_pad2d": ([f32(2, 3, 4)], lambda L, x: L.nn.ConstantPad2d(2, -1.0)(x), True),
    "constant_pad3d": ([f32(1, 2, 2, 3, 4)], lambda L, x: L.nn.ConstantPad3d((1, 0, 2, 1, 0, 1), 0.5)(x), True),
    "zero_pad2d": ([f32(2, 3, 4, 5)], lambda L, x: L.nn.ZeroPad2d((1, 2, 0, 3))(x), True),
    "reflection_pad1d": ([f32(2, 3, 5)], lambda L, x: L.nn.ReflectionPad1d((2, 3))(x), True),
    "reflection_pad2d": ([f32(2, 3, 4, 5)], lambda L, x: L.nn.ReflectionPad2d(2)(x), True),
    "replication_pad1d": ([f32(2, 3, 5)], lambda L, x: L.nn.ReplicationPad1d(3)(x), True),
    "replication_pad2d": ([f32(2, 3, 4, 5)], lambda L, x: L.nn.ReplicationPad2d((1, 0, 3, 2))(x), True),
    "reflection_pad3d": ([f32(1, 2, 3, 4, 5)], lambda L, x: L.nn.ReflectionPad3d((1, 2, 2, 1, 0, 2))(x), True),
    "replication_pad3d": ([f32(2, 3, 4, 5)], lambda L, x: L.nn.ReplicationPad3d(1)(x), True),
    "adaptive_avg_pool1d": ([f32(2, 3, 12)], lambda L, x: L.nn.functional.adaptive_avg_pool1d(x, 4), True),
    "adaptive_avg_pool1d_uneven": ([f32(2, 3, 10)], lambda L, x: L.nn.AdaptiveAvgPool1d(3)(x), True),
    "adaptive_avg_pool1d_unbatched": ([f32(3, 8)], lambda L, x: L.nn.AdaptiveAvgPool1d(1)(x), True),
    "lp_pool1d": ([pos(2, 3, 9)], lambda L, x: L.nn.functional.lp_pool1d(x, 2, 3), True),
    "lp_pool1d_stride": ([pos(2, 3, 9)], lambda L, x: L.nn.LPPool1d(3, 2, stride=1)(x), True),
    "lp_pool2d": ([pos(2, 3, 6, 6)], lambda L, x: L.nn.functional.lp_pool2d(x, 2.0, 2), True),
    "lp_pool2d_rect": ([pos(1, 2, 6, 7)], lambda L, x: L.nn.LPPool2d(1.5, (2, 3), stride=(2, 1))(x), True),
    # random layers in eval mode (and the functions' defaults: alpha dropouts default to eval)
    "dropout_eval": ([f32(2, 3, 4, 5)], lambda L, x: L.nn.Dropout3d(0.4).eval()(L.nn.Dropout2d().eval()(x)), True),
    "dropout1d_eval": ([f32(2, 3, 4)], lambda L, x: L.nn.functional.dropout1d(x, 0.3, training=False), True),
    "alpha_dropout_default": ([f32(3, 4)], lambda L, x: L.nn.functional.alpha_dropout(x, 0.3), True),
    "feature_alpha_dropout_default": ([f32(2, 3, 4)], lambda L, x: L.nn.functional.feature_alpha_dropout(x), True),
    "alpha_modules_eval": ([f32(2, 3, 4)], lambda L, x: L.nn.AlphaDropout(0.2).eval()(x) +
                           L.nn.FeatureAlphaDropout(0.2).eval()(x), True),
    "dropout_p0_training": ([f32(2, 3, 4)], lambda L, x: L.nn.functional.dropout2d(x, 0.0) +
                            L.nn.functional.alpha_dropout(x, 0.0, training=True), True),
    "dropout_p1_training": ([f32(2, 3, 4, 2)], lambda L, x: L.nn.functional.dropout2d(x, 1.0) +
                            L.nn.functional.alpha_dropout(x, 1.0, training=True), True),
}


def _run(lib, arrays, call, grad):
    ts = []
    for a in arrays:
        t = lib.tensor(a)
        if grad:
            t.requires_grad_(True)
        ts.append(t)
    return ts, call(lib, *ts)


@pytest.mark.filterwarnings("ignore:nn.functional.upsample", "ignore:dropout2d. Received a 3D")
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(torch, name):
    arrays, call, differentiable = CASES[name]
    o_in, o_out = _run(oar, arrays, call, differentiable)
    t_in, t_out = _run(torch, arrays, call, differentiable)
    o, t = o_out.detach().numpy(), t_out.detach().numpy()
    assert o.shape == t.shape, f"{name}: shape {o.shape}, torch's {t.shape}"
    assert o.dtype == t.dtype, f"{name}: dtype {o.dtype}, torch's {t.dtype}"
    np.testing.assert_allclose(o, t, rtol=2e-5, atol=2e-6, err_msg=name)
    if differentiable:
        g = R.standard_normal(t.shape).astype(t.dtype)
        (o_out * oar.tensor(g)).sum().backward()
        (t_out * torch.tensor(g)).sum().backward()
        for k, (oi, ti) in enumerate(zip(o_in, t_in)):
            assert oi.grad is not None, f"{name}: no gradient for input {k}"
            np.testing.assert_allclose(oi.grad.numpy(), ti.grad.numpy(), rtol=2e-4, atol=2e-5,
                                       err_msg=f"{name} d/d input {k}")


# module constructor calls, run on both libraries: the reprs must be torch's
MODULES = [
    "Threshold(0.1, 20)", "Threshold(0.5, 1.0, inplace=True)", "RReLU()", "RReLU(0.1, 0.3, inplace=True)", "SELU()",
    "SELU(inplace=True)", "CELU()", "CELU(0.5, True)", "Hardshrink()", "Softshrink(0.25)", "Softsign()", "Tanhshrink()",
    "LogSigmoid()", "Softmin()", "Softmin(dim=1)", "Softmax2d()", "PixelShuffle(2)", "PixelUnshuffle(3)",
    "ChannelShuffle(4)", "Upsample(scale_factor=2)", "Upsample(size=(4, 5), mode='bilinear')",
    "Upsample(scale_factor=(2, 3))", "UpsamplingNearest2d(size=7)", "UpsamplingBilinear2d(scale_factor=2)",
    "ConstantPad1d(2, 3.5)", "ConstantPad2d((1, 2, 3, 4), 0)", "ConstantPad3d(1, -1.0)", "ZeroPad2d(2)",
    "ZeroPad2d((1, 0, 2, 3))", "ReflectionPad1d(3)", "ReflectionPad2d((1, 2, 0, 1))", "ReplicationPad1d((2, 1))",
    "ReplicationPad2d(1)", "ReflectionPad3d(1)", "ReplicationPad3d((1, 0, 2, 1, 0, 3))",
    "AdaptiveAvgPool1d(5)", "Dropout1d()", "Dropout2d(0.3)", "Dropout3d(0.1, True)",
    "AlphaDropout(0.2)", "FeatureAlphaDropout()", "LPPool1d(2, 3)", "LPPool2d(1.5, (2, 3), stride=1)",
    "Sequential(SELU(), PixelShuffle(2), ZeroPad2d(1))",
]


@pytest.mark.parametrize("ctor", MODULES)
def test_repr_matches_torch(torch, ctor):
    build = lambda lib: eval(ctor, {k: getattr(lib.nn, k) for k in dir(lib.nn) if k[:1].isupper()})
    assert repr(build(oar)) == repr(build(torch))


def test_defaults_match_torch(torch):
    """Signatures and defaults of the new functions are torch's."""
    import inspect
    names = ["selu", "celu", "softshrink", "hardshrink", "threshold", "rrelu", "pixel_shuffle", "pixel_unshuffle",
             "channel_shuffle", "upsample", "upsample_nearest", "upsample_bilinear", "adaptive_avg_pool1d",
             "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout", "lp_pool1d",
             "lp_pool2d", "softsign", "tanhshrink"]
    checked = 0
    for n in names:
        o = inspect.signature(getattr(oar.nn.functional, n)).parameters
        try:
            t = inspect.signature(getattr(torch.nn.functional, n)).parameters
        except ValueError:  # a C builtin in torch (softshrink, pixel_shuffle, ...): its values are checked above
            continue
        checked += 1
        assert list(o) == list(t), n
        assert [p.default for p in o.values()] == [p.default for p in t.values()], n
    assert checked >= 15


def test_channel_shuffle_gradient():
    """The gradient of a permutation is the inverse permutation: shuffling by C / g undoes g."""
    x = oar.tensor(f32(2, 6, 3), requires_grad=True)
    g = f32(2, 6, 3)
    (oar.nn.functional.channel_shuffle(x, 2) * oar.tensor(g)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), oar.nn.functional.channel_shuffle(oar.tensor(g), 3).numpy())


def test_rrelu_training_slopes():
    """Training: negatives get their own slope, uniform in [lower, upper), from oar's generator."""
    oar.manual_seed(3)
    x = -oar.ones(20000)
    y = oar.nn.functional.rrelu(x, 0.1, 0.3, training=True)
    slopes = (-y).numpy()
    assert slopes.min() >= 0.1 and slopes.max() < 0.3
    assert abs(slopes.mean() - 0.2) < 0.005 and abs(slopes.std() - 0.2 / np.sqrt(12)) < 0.005
    pos_x = oar.ones(5)
    assert oar.nn.RReLU()(pos_x).tolist() == [1.0] * 5  # training mode: positives pass
    oar.manual_seed(3)
    assert np.array_equal(oar.nn.functional.rrelu(x, 0.1, 0.3, training=True).numpy(), y.numpy())
    xg = oar.tensor(f32(50), requires_grad=True)
    out = oar.nn.functional.rrelu(xg, 0.1, 0.3, training=True)
    out.sum().backward()  # the gradient is each element's own slope (1 for positives)
    np.testing.assert_allclose(xg.grad.numpy(), (out / xg).detach().numpy(), rtol=1e-6)


def test_inplace_writes_the_input():
    F = oar.nn.functional
    for fn, args in ((F.selu_, ()), (F.celu_, (0.5,)), (F.elu_, ()), (F.leaky_relu_, (0.2,)),
                     (F.hardtanh_, (-0.5, 0.5)), (F.threshold_, (0.1, 9.0))):
        a = f32(3, 4)
        x = oar.tensor(a)
        assert fn(x, *args) is x
        expect = getattr(F, fn.__name__[:-1])(oar.tensor(a), *args)
        np.testing.assert_array_equal(x.numpy(), expect.numpy(), err_msg=fn.__name__)
    x = oar.tensor(KINKS)
    oar.nn.Threshold(0.1, 9.0, inplace=True)(x)
    assert np.array_equal(x.numpy(), np.where(KINKS > 0.1, KINKS, 9.0))


def test_upsample_functions_warn_as_torch():
    for fn in ("upsample", "upsample_nearest", "upsample_bilinear"):
        with pytest.warns(UserWarning, match=f"nn.functional.{fn} is deprecated"):
            getattr(oar.nn.functional, fn)(oar.zeros(1, 1, 2, 2), scale_factor=2)


@pytest.mark.parametrize("fn,shape,feature", [("dropout1d", (40, 50, 6), 2), ("dropout2d", (40, 50, 3, 2), 2),
                                              ("dropout3d", (40, 50, 2, 2, 2), 2), ("dropout3d", (400, 2, 2, 2), 1)])
def test_channel_dropout_statistics(fn, shape, feature):
    """Whole channels are zeroed (about p of them), the rest scaled by 1 / (1 - p)."""
    oar.manual_seed(7)
    p = 0.3
    x = oar.tensor(pos(*shape))
    y = getattr(oar.nn.functional, fn)(x, p).numpy()
    ratio = (y / x.numpy()).reshape(int(np.prod(shape[:feature])), -1)
    kept = ratio[:, 0] != 0
    np.testing.assert_allclose(ratio[kept], 1 / (1 - p), rtol=1e-5)
    assert np.all(ratio[~kept] == 0)
    assert abs((~kept).mean() - p) < 0.04


@pytest.mark.parametrize("feature", [False, True])
def test_alpha_dropout_statistics(feature):
    """Kept units are a x + b, dropped ones take one value; mean 0 and variance 1 are kept."""
    oar.manual_seed(11)
    p, ap = 0.2, 1.7580993408473766
    a = 1 / np.sqrt((ap * ap * p + 1) * (1 - p))
    x = f32(300, 200, 4) if feature else f32(600, 400)
    fn = oar.nn.functional.feature_alpha_dropout if feature else oar.nn.functional.alpha_dropout
    y = fn(oar.tensor(x), p, training=True).numpy()
    kept = np.isclose(y, a * x + ap * a * p, atol=1e-5)
    dropped = np.isclose(y, -ap * a + ap * a * p, atol=1e-5)
    assert np.all(kept | dropped)
    if feature:  # one fate per channel
        assert np.all(kept.all(-1) | dropped.all(-1))
        dropped = dropped.all(-1)
    assert abs(dropped.mean() - p) < 0.01
    assert abs(y.mean()) < 0.02 and abs(y.std() - 1) < 0.02


def test_modules_train_vs_eval():
    oar.manual_seed(1)
    x = oar.tensor(f32(8, 16, 3, 3))
    m = oar.nn.Dropout2d(0.5)
    assert not np.array_equal(m(x).numpy(), x.numpy())
    assert np.array_equal(m.eval()(x).numpy(), x.numpy())


def test_bad_input_errors():
    F = oar.nn.functional
    with pytest.raises(RuntimeError, match="divisible by the square"):
        F.pixel_shuffle(oar.zeros(1, 5, 2, 2), 2)
    with pytest.raises(RuntimeError, match="divisible by"):
        F.pixel_unshuffle(oar.zeros(1, 1, 3, 4), 2)
    with pytest.raises(RuntimeError, match="dividing"):
        F.channel_shuffle(oar.zeros(1, 5, 2), 2)
    with pytest.raises(RuntimeError, match="a 3D .* or 4D"):
        oar.nn.Softmax2d()(oar.zeros(2, 3))
    with pytest.raises(RuntimeError, match="Expected 2D or 3D"):
        F.dropout1d(oar.zeros(2, 3, 4, 5))
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout3d(oar.zeros(1, 2, 2, 2, 2), 1.5)
    with pytest.raises(RuntimeError, match="leaf"):
        F.selu_(oar.zeros(3, requires_grad=True))


def _small_sr_net(L):
    nn = L.nn
    return nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(3, 8, 3), nn.SELU(), nn.Conv2d(8, 12, 3, padding=1),
                         nn.PixelShuffle(2), nn.CELU(0.5), nn.ReplicationPad2d((2, 0, 0, 2)), nn.Conv2d(3, 4, 3),
                         nn.Softsign(), nn.UpsamplingBilinear2d(scale_factor=2), nn.LPPool2d(2, 2),
                         nn.Hardshrink(0.05), nn.PixelUnshuffle(2), nn.ZeroPad2d(1), nn.Tanhshrink(), nn.Softmax2d())


def test_small_network_with_torch_weights(torch):
    """The layers together in a model, torch's weights loaded: the output and every gradient."""
    torch.manual_seed(0)
    t_net = _small_sr_net(torch)
    o_net = _small_sr_net(oar)
    o_net.load_state_dict({k: oar.tensor(v.detach().numpy()) for k, v in t_net.state_dict().items()})
    assert repr(o_net) == repr(t_net)
    x = f32(2, 3, 6, 6)
    t_out, o_out = t_net(torch.tensor(x)), o_net(oar.tensor(x))
    np.testing.assert_allclose(o_out.detach().numpy(), t_out.detach().numpy(), rtol=1e-4, atol=1e-6)
    g = f32(*t_out.shape)
    (t_out * torch.tensor(g)).sum().backward()
    (o_out * oar.tensor(g)).sum().backward()
    o_params = dict(o_net.named_parameters())
    for name, p in t_net.named_parameters():
        np.testing.assert_allclose(o_params[name].grad.numpy(), p.grad.numpy(), rtol=1e-3, atol=1e-6, err_msg=name)
