"""oar.nn's margin, embedding, likelihood and triplet losses and the distances (functional.py's section
"losses and distances", modules/loss_more.py), table-driven beside torch 1.13: each case runs the same
call on both libraries from the same arrays, for every reduction; values must agree, and so must the
gradient of sum(out * g) for the inputs the case names."""
import math

import numpy as np
import pytest

import oar

R = np.random.default_rng(14)
pytestmark = pytest.mark.filterwarnings("ignore:size_average and reduce args")  # torch's deprecation notice


def f32(*shape):
    return R.standard_normal(shape).astype(np.float32)


def pos(*shape):
    return (R.random(shape) + 0.1).astype(np.float32)


def sign(*shape):
    return np.where(R.random(shape) > 0.5, 1.0, -1.0).astype(np.float32)


def ints(hi, *shape):
    return R.integers(0, hi, shape).astype(np.int64)


def FN(name, **kw):
    """call(lib, *tensors, reduction) of nn.functional.name with keyword arguments kw"""
    return lambda L, *ts, **r: getattr(L.nn.functional, name)(*ts, **kw, **r)


# the -1 ends each row's targets: what follows it is not a target
MLM_TARGET = np.array([[3, 0, -1, 1], [1, 2, 3, -1], [-1, 2, 0, 1]], np.int64)
TINY_VAR = np.array([[0.5, 1e-9, 2.0, 0.3], [1e-7, 1.5, 0.8, 3.0], [0.2, 0.9, 1e-8, 1.1]], np.float32)
STIRLING_T = np.array([[0.5, 2.0, 5.0, 1.0], [3.0, 0.25, 7.0, 1.5]], np.float32)  # both sides of the target > 1 cut


def cos_dist(L):
    return lambda a, b: 1 - L.nn.functional.cosine_similarity(a, b)


# name -> (inputs, call(lib, *tensors, reduction=...), indices of the inputs whose gradient is checked)
LOSSES = {
    "soft_margin": ([f32(3, 5) * 3, sign(3, 5)], FN("soft_margin_loss"), (0,)),
    "margin_ranking": ([f32(6), f32(6), sign(6)], FN("margin_ranking_loss", margin=0.3), (0, 1)),
    "margin_ranking_2d": ([f32(2, 4), f32(2, 4), sign(2, 4)], FN("margin_ranking_loss"), (0, 1)),
    "hinge_embedding": ([f32(3, 4) * 2, sign(3, 4)], FN("hinge_embedding_loss"), (0,)),
    "hinge_embedding_margin": ([f32(3, 4) * 2, np.array([1, -1, 0, 2] * 3, np.float32).reshape(3, 4)],
                               FN("hinge_embedding_loss", margin=0.7), (0,)),
    "cosine_embedding": ([f32(4, 5), f32(4, 5), sign(4)], FN("cosine_embedding_loss", margin=0.2), (0, 1)),
    "cosine_embedding_1d": ([f32(5), f32(5), np.array(-1.0, np.float32)],
                            FN("cosine_embedding_loss", margin=-0.5), (0, 1)),
    "multilabel_soft_margin": ([f32(3, 5), ints(2, 3, 5).astype(np.float32)], FN("multilabel_soft_margin_loss"),
                               (0,)),
    "multilabel_soft_margin_weight": ([f32(3, 5), R.random((3, 5)).astype(np.float32), pos(5)],
                                      lambda L, x, y, w, **r: L.nn.functional.multilabel_soft_margin_loss(
                                          x, y, weight=w, **r), (0, 1, 2)),
    "multi_margin": ([f32(4, 5), ints(5, 4)], FN("multi_margin_loss"), (0,)),
    "multi_margin_p2_weight": ([f32(4, 5), ints(5, 4), pos(5)],
                               lambda L, x, y, w, **r: L.nn.functional.multi_margin_loss(x, y, p=2, margin=0.5,
                                                                                         weight=w, **r), (0,)),
    "multi_margin_1d": ([f32(5), np.array([3], np.int64)], FN("multi_margin_loss", margin=2.0), (0,)),
    "multi_margin_1d_scalar_target": ([f32(5), np.array(1, np.int64)], FN("multi_margin_loss", p=2), (0,)),
    "multilabel_margin": ([f32(3, 4), MLM_TARGET], FN("multilabel_margin_loss"), (0,)),
    "multilabel_margin_1d": ([f32(4), np.array([2, 0, -1, 3], np.int64)], FN("multilabel_margin_loss"), (0,)),
    "gaussian_nll": ([f32(3, 4), f32(3, 4), TINY_VAR], FN("gaussian_nll_loss"), (0, 1, 2)),
    "gaussian_nll_one_var": ([f32(3, 4), f32(3, 4), pos(3)], FN("gaussian_nll_loss", full=True), (0, 1, 2)),
    "gaussian_nll_var_col": ([f32(3, 4), f32(3, 4), pos(3, 1)], FN("gaussian_nll_loss", eps=0.3), (0, 1, 2)),
    "poisson_nll": ([f32(3, 4), pos(3, 4) * 3], FN("poisson_nll_loss"), (0,)),
    "poisson_nll_rates": ([pos(3, 4), pos(3, 4) * 3], FN("poisson_nll_loss", log_input=False, eps=0.05), (0,)),
    "poisson_nll_full": ([f32(2, 4), STIRLING_T], FN("poisson_nll_loss", full=True), (0, 1)),
    "triplet_margin": ([f32(4, 5), f32(4, 5), f32(4, 5)], FN("triplet_margin_loss"), (0, 1, 2)),
    "triplet_margin_p1_swap": ([f32(4, 5), f32(4, 5), f32(4, 5)],
                               FN("triplet_margin_loss", margin=2.5, p=1, swap=True), (0, 1, 2)),
    "triplet_margin_1d": ([f32(5), f32(5), f32(5)], FN("triplet_margin_loss", margin=3.0, eps=0.1), (0, 1, 2)),
    "triplet_distance": ([f32(4, 5), f32(4, 5), f32(4, 5)], FN("triplet_margin_with_distance_loss", margin=2.0),
                         (0, 1, 2)),
    "triplet_distance_cos_swap": ([f32(4, 5), f32(4, 5), f32(4, 5)],
                                  lambda L, a, p, n, **r: L.nn.functional.triplet_margin_with_distance_loss(
                                      a, p, n, distance_function=cos_dist(L), margin=0.8, swap=True, **r), (0, 1, 2)),
}

# name -> (inputs, call(lib, *tensors), gradient inputs): the distances and the bilinear map
DISTANCES = {
    "pairwise_distance": ([f32(4, 5), f32(4, 5)], lambda L, a, b: L.nn.functional.pairwise_distance(a, b), (0, 1)),
    "pairwise_distance_p1_keepdim": ([f32(4, 5), f32(5)],
                                     lambda L, a, b: L.nn.functional.pairwise_distance(a, b, 1.0, 1e-3, True), (0, 1)),
    "pairwise_distance_inf": ([f32(3, 4), f32(3, 4)],
                              lambda L, a, b: L.nn.functional.pairwise_distance(a, b, math.inf), (0, 1)),
    "pdist": ([f32(5, 3)], lambda L, a: L.nn.functional.pdist(a), (0,)),
    "pdist_p3": ([f32(4, 3)], lambda L, a: L.nn.functional.pdist(a, 3), (0,)),
    "bilinear": ([f32(4, 3), f32(4, 2), f32(5, 3, 2), f32(5)], lambda L, a, b, w, c: L.nn.functional.bilinear(
        a, b, w, c), (0, 1, 2, 3)),
    "bilinear_lead_no_bias": ([f32(2, 4, 3), f32(2, 4, 2), f32(5, 3, 2)],
                              lambda L, a, b, w: L.nn.functional.bilinear(a, b, w), (0, 1, 2)),
}


def _run(lib, arrays, grad):
    ts = []
    for k, a in enumerate(arrays):
        t = lib.tensor(a)
        if k in grad:
            t.requires_grad_(True)
        ts.append(t)
    return ts


def _check(torch, name, arrays, call, grad):
    o_in, t_in = _run(oar, arrays, grad), _run(torch, arrays, grad)
    o_out, t_out = call(oar, *o_in), call(torch, *t_in)
    o, t = o_out.detach().numpy(), t_out.detach().numpy()
    assert o.shape == t.shape, f"{name}: shape {o.shape}, torch's {t.shape}"
    np.testing.assert_allclose(o, t, rtol=2e-5, atol=2e-6, err_msg=name)
    g = R.standard_normal(t.shape).astype(np.float32)
    (o_out * oar.tensor(g)).sum().backward()
    (t_out * torch.tensor(g)).sum().backward()
    for k in grad:
        assert o_in[k].grad is not None, f"{name}: no gradient for input {k}"
        np.testing.assert_allclose(o_in[k].grad.numpy(), t_in[k].grad.numpy(), rtol=2e-4, atol=2e-5,
                                   err_msg=f"{name} d/d input {k}")


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss_matches_torch(torch, name, reduction):
    arrays, call, grad = LOSSES[name]
    _check(torch, f"{name} {reduction}", arrays, lambda L, *ts: call(L, *ts, reduction=reduction), grad)


@pytest.mark.parametrize("name", sorted(DISTANCES))
def test_distance_matches_torch(torch, name):
    _check(torch, name, *DISTANCES[name])


# (constructor(lib), inputs, gradient inputs): the modules, default and legacy arguments, and their reprs
MODULES = [
    (lambda L: L.nn.SoftMarginLoss(), [f32(3, 4), sign(3, 4)], (0,)),
    (lambda L: L.nn.SoftMarginLoss(size_average=False), [f32(3, 4), sign(3, 4)], (0,)),
    (lambda L: L.nn.MarginRankingLoss(margin=0.5, reduce=False), [f32(5), f32(5), sign(5)], (0, 1)),
    (lambda L: L.nn.HingeEmbeddingLoss(margin=2.0, reduction="sum"), [f32(3, 4), sign(3, 4)], (0,)),
    (lambda L: L.nn.CosineEmbeddingLoss(0.1), [f32(3, 4), f32(3, 4), sign(3)], (0, 1)),
    (lambda L: L.nn.MultiLabelSoftMarginLoss(weight=L.tensor([0.5, 1.0, 2.0, 1.5])),
     [f32(3, 4), ints(2, 3, 4).astype(np.float32)], (0,)),
    (lambda L: L.nn.MultiMarginLoss(p=2, margin=0.7, weight=L.tensor([0.5, 1.0, 2.0, 1.5]), reduction="none"),
     [f32(3, 4), ints(4, 3)], (0,)),
    (lambda L: L.nn.MultiLabelMarginLoss(), [f32(3, 4), MLM_TARGET], (0,)),
    (lambda L: L.nn.GaussianNLLLoss(full=True, eps=1e-3, reduction="sum"), [f32(3, 4), f32(3, 4), TINY_VAR],
     (0, 2)),
    (lambda L: L.nn.PoissonNLLLoss(log_input=False, full=True, size_average=False),
     [pos(2, 4), STIRLING_T], (0,)),
    (lambda L: L.nn.TripletMarginLoss(margin=1.5, p=3, swap=True), [f32(4, 5), f32(4, 5), f32(4, 5)], (0, 1, 2)),
    (lambda L: L.nn.TripletMarginWithDistanceLoss(distance_function=L.nn.PairwiseDistance(p=1), swap=True),
     [f32(4, 5), f32(4, 5), f32(4, 5)], (0, 1, 2)),
    (lambda L: L.nn.TripletMarginWithDistanceLoss(), [f32(4, 5), f32(4, 5), f32(4, 5)], (0, 1, 2)),
    (lambda L: L.nn.HuberLoss(), [f32(3, 4) * 2, f32(3, 4)], (0, 1)),
    (lambda L: L.nn.HuberLoss(reduction="none", delta=0.4), [f32(3, 4) * 2, f32(3, 4)], (0, 1)),
    (lambda L: L.nn.PairwiseDistance(p=1.0, keepdim=True), [f32(3, 4), f32(3, 4)], (0, 1)),
    (lambda L: L.nn.CosineSimilarity(dim=0, eps=1e-6), [f32(3, 4), f32(3, 4)], (0, 1)),
]


@pytest.mark.parametrize("k", range(len(MODULES)))
def test_module_matches_torch(torch, k):
    make, arrays, grad = MODULES[k]
    o_mod, t_mod = make(oar), make(torch)
    assert repr(o_mod) == repr(t_mod)
    _check(torch, repr(t_mod), arrays, lambda L, *ts: (o_mod if L is oar else t_mod)(*ts), grad)


def test_legacy_reduction_arguments(torch):
    """size_average / reduce override reduction as torch's: reduce=False -> none, size_average=False -> sum"""
    x, y = f32(3, 4), sign(3, 4)
    for kw in ({"reduce": False}, {"size_average": False}, {"size_average": True, "reduction": "sum"},
               {"reduce": True, "size_average": False, "reduction": "none"}):
        got = oar.nn.functional.soft_margin_loss(oar.tensor(x), oar.tensor(y), **kw).numpy()
        want = torch.nn.functional.soft_margin_loss(torch.tensor(x), torch.tensor(y), **kw).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=str(kw))


def test_bilinear_module_init_and_repr(torch):
    m = oar.nn.Bilinear(20, 30, 40)
    assert repr(m) == repr(torch.nn.Bilinear(20, 30, 40)) == \
        "Bilinear(in1_features=20, in2_features=30, out_features=40, bias=True)"
    assert repr(oar.nn.Bilinear(2, 3, 4, bias=False)) == repr(torch.nn.Bilinear(2, 3, 4, bias=False))
    assert tuple(m.weight.shape) == (40, 20, 30) and tuple(m.bias.shape) == (40,)
    bound = 1 / math.sqrt(20)  # torch's: uniform in +-1/sqrt(in1_features), the bias too
    w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound and np.abs(b).max() > 0.5 * bound
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    x1, x2 = f32(6, 20), f32(6, 30)
    t = torch.nn.Bilinear(20, 30, 40)
    with torch.no_grad():
        t.weight.copy_(torch.tensor(w))
        t.bias.copy_(torch.tensor(b))
    np.testing.assert_allclose(m(oar.tensor(x1), oar.tensor(x2)).detach().numpy(),
                               t(torch.tensor(x1), torch.tensor(x2)).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_bad_input_is_a_clear_error():
    F, x = oar.nn.functional, oar.tensor(f32(3, 4))
    with pytest.raises(ValueError, match="only p == 1 and p == 2"):
        F.multi_margin_loss(x, oar.tensor([0, 1, 2]), p=3)
    with pytest.raises(ValueError, match="only p == 1 and p == 2"):
        oar.nn.MultiMarginLoss(p=3)
    with pytest.raises(ValueError, match="negative"):
        F.gaussian_nll_loss(x, x, oar.tensor(-pos(3, 4)))
    with pytest.raises(ValueError, match="var is of incorrect size"):
        F.gaussian_nll_loss(x, x, oar.tensor(pos(4)))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.soft_margin_loss(x, x, reduction="avg")
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        F.triplet_margin_loss(x, x, x[0])
    with pytest.raises(ValueError, match="target of the input's shape"):
        F.multilabel_margin_loss(x, oar.tensor([[0, 1]]))
    with pytest.raises(ValueError, match="one class index per sample"):
        F.multi_margin_loss(x, oar.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="pdist only supports 2D"):
        F.pdist(x[0])
    with pytest.raises(ValueError, match="margin to be greater than 0"):
        oar.nn.TripletMarginWithDistanceLoss(margin=0)


BAG_IDX = np.array([3, 3, 7, 0, 2, 9, 2, 5, 2], np.int64)  # a row twice in one bag; padding 2 fills bag 2 [4:5]
BAG_OFF = np.array([0, 3, 3, 4, 5], np.int64)               # bag 1 is empty
# name -> (inputs, call(lib, *tensors, mode=...), gradient inputs): every mode runs each
BAGS = {
    "2d": ([ints(10, 3, 4), f32(10, 4)], lambda L, i, w, **m: L.nn.functional.embedding_bag(i, w, **m), (1,)),
    "offsets": ([BAG_IDX, f32(10, 4), BAG_OFF], lambda L, i, w, o, **m: L.nn.functional.embedding_bag(i, w, o, **m),
                (1,)),
    "last_offset": ([BAG_IDX, f32(10, 4), np.array([0, 2, 2, 6, 9], np.int64)],
                    lambda L, i, w, o, **m: L.nn.functional.embedding_bag(i, w, o, include_last_offset=True, **m),
                    (1,)),
    "padding": ([BAG_IDX, f32(10, 4), BAG_OFF],
                lambda L, i, w, o, **m: L.nn.functional.embedding_bag(i, w, o, padding_idx=2, **m), (1,)),
    "padding_negative_2d": ([np.array([[9, 1, 9], [9, 9, 9], [4, 9, 0]], np.int64), f32(10, 3)],
                            lambda L, i, w, **m: L.nn.functional.embedding_bag(i, w, padding_idx=-1, **m), (1,)),
}


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("name", sorted(BAGS))
def test_embedding_bag_matches_torch(torch, name, mode):
    arrays, call, grad = BAGS[name]
    _check(torch, f"embedding_bag {name} {mode}", arrays, lambda L, *ts: call(L, *ts, mode=mode), grad)


def test_embedding_bag_per_sample_weights_and_module(torch):
    w = f32(10, 4)
    _check(torch, "per_sample_weights", [BAG_IDX, w, BAG_OFF, pos(9)],
           lambda L, i, w, o, p: L.nn.functional.embedding_bag(i, w, o, mode="sum", per_sample_weights=p), (1, 3))
    for kw in ({}, {"mode": "max", "padding_idx": -2}, {"mode": "sum", "include_last_offset": True, "norm_type": 1.0}):
        o_m = oar.nn.EmbeddingBag.from_pretrained(oar.tensor(w), freeze=False, **kw)
        t_m = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(w), freeze=False, **kw)
        assert repr(o_m) == repr(t_m)
        # with include_last_offset the last offset closes the last bag: here at the end of the input, since
        # torch 1.13's backward leaves the weight rows of entries past it uninitialized (its gradient there
        # is whatever memory held; oar's is 0)
        off = np.append(BAG_OFF, len(BAG_IDX)) if kw.get("include_last_offset") else BAG_OFF
        _check(torch, repr(t_m), [BAG_IDX, off],
               lambda L, i, o: (o_m if L is oar else t_m)(i, o), ())
        o_m(oar.tensor(BAG_IDX), oar.tensor(off)).sum().backward()
        t_m(torch.tensor(BAG_IDX), torch.tensor(off)).sum().backward()
        np.testing.assert_allclose(o_m.weight.grad.numpy(), t_m.weight.grad.numpy(), rtol=1e-5, atol=1e-6)
    m = oar.nn.EmbeddingBag(30, 5, padding_idx=3)
    assert repr(m) == repr(torch.nn.EmbeddingBag(30, 5, padding_idx=3)) == \
        "EmbeddingBag(30, 5, mode=mean, padding_idx=3)"
    weight = m.weight.detach().numpy()
    assert not weight[3].any() and abs(weight.std() - 1) < 0.3  # torch's init: normal, the padding row zero
    with pytest.raises(NotImplementedError, match="only supported for mode='sum'"):
        oar.nn.functional.embedding_bag(oar.tensor(BAG_IDX), oar.tensor(w), oar.tensor(BAG_OFF),
                                        per_sample_weights=oar.tensor(pos(9)))
    with pytest.raises(ValueError, match="offsets has to be None"):
        oar.nn.functional.embedding_bag(oar.tensor(ints(10, 2, 3)), oar.tensor(w), oar.tensor(BAG_OFF))
    with pytest.raises(ValueError, match="needs offsets"):
        oar.nn.functional.embedding_bag(oar.tensor(BAG_IDX), oar.tensor(w))
