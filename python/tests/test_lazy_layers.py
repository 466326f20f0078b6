"""torch.nn's lazy layers beside torch 1.13: before the first call the parameters are uninitialized;
the first input gives in_features / in_channels / num_features, the module becomes the plain layer
with torch's shapes and repr, and with torch's weights copied in it gives torch's output."""
import numpy as np
import pytest

import oar
from conftest import torch_or_skip

R = np.random.default_rng(31)

CASES = {
    "LazyLinear": (lambda nn: nn.LazyLinear(5), (3, 7)),
    "LazyLinear_nobias_3d": (lambda nn: nn.LazyLinear(4, bias=False), (2, 3, 6)),
    "LazyConv1d": (lambda nn: nn.LazyConv1d(4, 3, padding=1), (2, 3, 9)),
    "LazyConv1d_unbatched": (lambda nn: nn.LazyConv1d(2, 2), (3, 7)),
    "LazyConv2d_groups": (lambda nn: nn.LazyConv2d(6, 3, stride=2, groups=2), (2, 4, 9, 9)),
    "LazyConv2d_unbatched": (lambda nn: nn.LazyConv2d(3, 2, bias=False), (5, 6, 6)),
    "LazyConv3d": (lambda nn: nn.LazyConv3d(2, 2), (1, 3, 4, 4, 4)),
    "LazyConvTranspose1d": (lambda nn: nn.LazyConvTranspose1d(3, 3, stride=2), (2, 4, 5)),
    "LazyConvTranspose2d": (lambda nn: nn.LazyConvTranspose2d(2, 3, output_padding=1, stride=2), (1, 3, 4, 4)),
    "LazyConvTranspose3d": (lambda nn: nn.LazyConvTranspose3d(2, 2, stride=2), (1, 3, 2, 3, 2)),
    "LazyBatchNorm1d": (lambda nn: nn.LazyBatchNorm1d(), (6, 5)),
    "LazyBatchNorm2d_eval_free": (lambda nn: nn.LazyBatchNorm2d(affine=False, track_running_stats=False),
                                  (2, 3, 4, 4)),
    "LazyBatchNorm3d": (lambda nn: nn.LazyBatchNorm3d(momentum=0.3), (2, 2, 3, 3, 3)),
}


@pytest.mark.filterwarnings("ignore:Lazy modules are a new feature")
@pytest.mark.parametrize("name", sorted(CASES))
def test_lazy_layer_becomes_torchs(name):
    torch = torch_or_skip()
    build, shape = CASES[name]
    x = R.standard_normal(shape).astype(np.float32)
    ours, theirs = build(oar.nn), build(torch.nn)
    assert ours.has_uninitialized_params() == theirs.has_uninitialized_params()
    if ours.has_uninitialized_params():
        assert isinstance(ours.weight if hasattr(ours, "weight") and ours.weight is not None else ours.running_mean,
                          oar.nn.parameter.UninitializedTensorMixin)
    ours(oar.from_numpy(x.copy()))
    theirs(torch.from_numpy(x.copy()))
    assert type(ours).__name__ == type(theirs).__name__
    assert repr(ours) == repr(theirs)
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    ours.load_state_dict({k: oar.from_numpy(v.detach().numpy().copy()) for k, v in theirs.state_dict().items()})
    y = R.standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(ours(oar.from_numpy(y.copy())).detach().numpy(),
                               theirs(torch.from_numpy(y.copy())).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_lazy_layer_trains_and_refuses_bad_groups():
    m = oar.nn.Sequential(oar.nn.LazyLinear(8), oar.nn.ReLU(), oar.nn.LazyLinear(1))
    x = oar.randn(4, 3)
    m(x)
    assert [tuple(p.shape) for p in m.parameters()] == [(8, 3), (8,), (1, 8), (1,)]
    opt = oar.optim.SGD(m.parameters(), lr=0.1)
    before = m[0].weight.detach().numpy().copy()
    m(x).sum().backward()
    opt.step()
    assert not np.allclose(before, m[0].weight.detach().numpy())
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        oar.nn.LazyConv2d(4, 3, groups=2)(oar.randn(1, 3, 5, 5))
