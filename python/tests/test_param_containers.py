"""nn.ParameterList and nn.ParameterDict beside torch 1.13: registration names (named_parameters,
state_dict), list and dict operations, plain tensors becoming Parameters, other objects kept,
reprs, an optimizer stepping them, and errors."""
import numpy as np
import pytest

import oar
from conftest import torch_or_skip


def _shapes(lib):
    lib.manual_seed(0)
    return [lib.randn(2, 3), lib.nn.Parameter(lib.randn(4)), lib.randn(1)]


def _trace(lib):
    out = []
    pl = lib.nn.ParameterList(_shapes(lib))
    pl.append(lib.randn(5))
    pl += [lib.randn(2, 2)]
    pl[1] = lib.randn(3)
    out.append(("list", len(pl), [n for n, _ in pl.named_parameters()], [tuple(p.shape) for p in pl],
                tuple(pl[-1].shape), [tuple(p.shape) for p in pl[1:3]], type(pl[0]).__name__,
                repr(pl).replace("oar.", "torch.")))
    pd = lib.nn.ParameterDict({"b": lib.randn(2), "a": lib.nn.Parameter(lib.ones(3))})
    pd["c"] = lib.zeros(1, 2)
    pd.update([("d", lib.ones(2)), ("b", lib.ones(4))])
    popped = pd.pop("a")
    other = pd | {"e": lib.ones(1)}
    out.append(("dict", list(pd.keys()), [n for n, _ in pd.named_parameters()], list(pd.state_dict()),
                tuple(popped.shape), "c" in pd, "a" in pd, len(pd), tuple(pd.get("zz", lib.ones(7)).shape),
                list(other.keys()), pd.popitem()[0], type(pd["b"]).__name__,
                repr(pd).replace("oar.", "torch."), tuple(pd.setdefault("q", lib.ones(2)).shape)))
    return out


def test_containers_behave_as_torchs():
    torch = torch_or_skip()
    ours, theirs = _trace(oar), _trace(torch)
    for o, t in zip(ours, theirs):
        assert o == t


def test_containers_train_and_refuse_bad_input():
    class M(oar.nn.Module):
        def __init__(self):
            super().__init__()
            self.scales = oar.nn.ParameterList([oar.ones(3), oar.ones(3)])
            self.bias = oar.nn.ParameterDict({"x": oar.zeros(3)})

        def forward(self, x):
            return x * self.scales[0] * self.scales[1] + self.bias["x"]

    m = M()
    opt = oar.optim.SGD(m.parameters(), lr=0.5)
    x = oar.from_numpy(np.array([1.0, 2.0, 3.0], np.float32))
    (m(x) - 1).pow(2).sum().backward()
    opt.step()
    assert len(list(m.parameters())) == 3
    assert sorted(m.state_dict()) == ["bias.x", "scales.0", "scales.1"]
    assert not np.allclose(m.scales[0].detach().numpy(), 1.0)
    with pytest.raises(TypeError, match="cannot be used as a key as it is not a string"):
        m.bias[3] = oar.ones(1)
    with pytest.raises(IndexError, match="index 5 is out of range"):
        m.scales[5]
    with pytest.raises(ValueError, match="element #0 has length 3; 2 is required"):
        oar.nn.ParameterDict([("a", 1, 2)])
