"""The API issue 14 listed as missing, each beside torch 1.13: TransformerDecoder(Layer) and
nn.Transformer, MultiheadAttention with kdim/vdim, add_bias_kv and add_zero_attn, dropout
between RNN layers, weight and pos_weight in the binary cross-entropies, and DataLoader worker
processes for an IterableDataset (torch's get_worker_info semantics and batch order)."""
import math

import numpy as np
import pytest

import oar

from test_torch_behaviours import _copy_weights, both, close

R = np.random.RandomState(11)


def f32(*shape):
    return R.randn(*shape).astype(np.float32)


def grads_match(om, tm, rtol=1e-3, atol=1e-4):
    names = [k for k, _ in om.named_parameters()]
    assert names == [k for k, _ in tm.named_parameters()]
    for (n, a), (_, b) in zip(om.named_parameters(), tm.named_parameters()):
        close(a.grad, b.grad, rtol=rtol, atol=atol, what=f"parameter grad {n}")


# ---------------------------------------------------------------- MultiheadAttention's options
@pytest.mark.parametrize("opts", [dict(kdim=5, vdim=3), dict(add_bias_kv=True), dict(add_zero_attn=True),
                                  dict(kdim=6, vdim=4, add_bias_kv=True, add_zero_attn=True, batch_first=True)],
                         ids=["kdim_vdim", "bias_kv", "zero_attn", "all"])
def test_multihead_attention_options_match_torch(torch, opts):
    E, H, L, S, N = 8, 2, 4, 5, 3
    tm, om = torch.nn.MultiheadAttention(E, H, **opts), oar.nn.MultiheadAttention(E, H, **opts)
    assert set(om.state_dict()) == set(tm.state_dict())
    _copy_weights(om, tm)
    kd, vd, bf = opts.get("kdim", E), opts.get("vdim", E), opts.get("batch_first", False)
    shp = (lambda n, l, e: (n, l, e)) if bf else (lambda n, l, e: (l, n, e))
    q, k, v = f32(*shp(N, L, E)), f32(*shp(N, S, kd)), f32(*shp(N, S, vd))
    pad = np.zeros((N, S), bool)
    pad[2, -2:] = True
    for masks in ({}, {"attn_mask": np.triu(np.ones((L, S), bool), 1), "key_padding_mask": pad},
                  {"attn_mask": f32(N * H, L, S)}):
        (qo, ko, vo), (qt, kt, vt) = both(torch, q, k, v)
        yo, wo = om(qo, ko, vo, **{n: oar.tensor(m) for n, m in masks.items()})
        yt, wt = tm(qt, kt, vt, **{n: torch.tensor(m) for n, m in masks.items()})
        close(yo, yt, what=f"output {list(masks)}")
        close(wo, wt, what=f"weights {list(masks)}")
        gy = f32(*yt.shape)
        (yo * oar.tensor(gy)).sum().backward()
        (yt * torch.tensor(gy)).sum().backward()
        for a, b, n in ((qo, qt, "q"), (ko, kt, "k"), (vo, vt, "v")):
            close(a.grad, b.grad, what=f"grad {n} {list(masks)}")
    grads_match(om, tm)


def test_multihead_attention_separate_projections_initialise_like_torch():
    m = oar.nn.MultiheadAttention(8, 2, kdim=5, vdim=3, add_bias_kv=True)
    assert m.in_proj_weight is None and tuple(m.k_proj_weight.shape) == (8, 5) and tuple(m.v_proj_weight.shape) == (8, 3)
    assert tuple(m.bias_k.shape) == (1, 1, 8) and float(m.bias_k.abs().sum()) > 0  # xavier_normal_, not zeros
    bound = math.sqrt(6.0 / (8 + 5))
    assert float(m.k_proj_weight.abs().max()) <= bound
    with pytest.raises(AssertionError, match="kdim, vdim"):
        m(oar.zeros(2, 1, 8), oar.zeros(3, 1, 8), oar.zeros(3, 1, 3))


# ---------------------------------------------------------------- the decoder and nn.Transformer
@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu")])
def test_transformer_decoder_matches_torch(torch, norm_first, activation):
    E, H, T, S, N = 8, 2, 4, 6, 3
    kw = dict(dim_feedforward=16, norm_first=norm_first, activation=activation, batch_first=True)
    td = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(E, H, **kw), 2, norm=torch.nn.LayerNorm(E))
    od = oar.nn.TransformerDecoder(oar.nn.TransformerDecoderLayer(E, H, **kw), 2, norm=oar.nn.LayerNorm(E))
    td.eval(), od.eval()
    _copy_weights(od, td)
    tgt, mem = f32(N, T, E), f32(N, S, E)
    pad = np.zeros((N, S), bool)
    pad[1, -1] = True
    causal = np.triu(np.ones((T, T), bool), 1)
    (to, mo), (tt, mt) = both(torch, tgt, mem)
    yo = od(to, mo, tgt_mask=oar.tensor(causal), memory_key_padding_mask=oar.tensor(pad))
    yt = td(tt, mt, tgt_mask=torch.tensor(causal), memory_key_padding_mask=torch.tensor(pad))
    close(yo, yt, rtol=1e-4, atol=1e-4)
    yo.pow(2).sum().backward()
    yt.pow(2).sum().backward()
    close(to.grad, tt.grad, rtol=1e-4, atol=1e-4, what="tgt grad")
    close(mo.grad, mt.grad, rtol=1e-4, atol=1e-4, what="memory grad")
    grads_match(od, td)


def test_transformer_matches_torch(torch):
    E, H, S, T, N = 8, 2, 5, 4, 2
    tm = torch.nn.Transformer(E, H, 2, 2, dim_feedforward=16, dropout=0.0)
    om = oar.nn.Transformer(E, H, 2, 2, dim_feedforward=16, dropout=0.0)
    for p in om.parameters():  # torch's init: xavier on every matrix
        if p.dim() > 1:
            fan_out, fan_in = p.shape[0], p.shape[1]
            assert float(p.abs().max()) <= math.sqrt(6.0 / (fan_in + fan_out)) + 1e-6
    _copy_weights(om, tm)
    src, tgt = f32(S, N, E), f32(T, N, E)
    mask_o, mask_t = oar.nn.Transformer.generate_square_subsequent_mask(T), \
        torch.nn.Transformer.generate_square_subsequent_mask(T)
    close(mask_o, mask_t)
    (so, go), (st, gt) = both(torch, src, tgt)
    yo, yt = om(so, go, tgt_mask=mask_o), tm(st, gt, tgt_mask=mask_t)
    close(yo, yt, rtol=1e-4, atol=1e-4)
    yo.sum().backward()
    yt.sum().backward()
    close(so.grad, st.grad, rtol=1e-4, atol=1e-4, what="src grad")
    grads_match(om, tm)
    with pytest.raises(RuntimeError, match="batch number of src and tgt"):
        om(oar.zeros(S, 2, E), oar.zeros(T, 3, E))


# ---------------------------------------------------------------- dropout between RNN layers
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_rnn_dropout_between_layers(torch, kind):
    x = f32(5, 3, 4)
    tm = getattr(torch.nn, kind)(4, 6, num_layers=3, dropout=1.0)
    om = getattr(oar.nn, kind)(4, 6, num_layers=3, dropout=1.0)
    _copy_weights(om, tm)
    # p = 1 zeroes every input of layers 2 and 3, whatever the random stream: torch's values
    (xo,), (xt,) = both(torch, x)
    yo, yt = om(xo)[0], tm(xt)[0]
    close(yo, yt, what="training, p=1")
    yo.sum().backward()
    yt.sum().backward()
    close(xo.grad, xt.grad, what="input grad, p=1 (none reaches it)")
    om.eval(), tm.eval()
    close(om(oar.tensor(x))[0], tm(torch.tensor(x))[0], what="eval: no dropout")
    # p = 0.5: training differs from eval, and never after the last layer (its output is not dropped)
    om.dropout = 0.5
    om.train()
    train_out = om(oar.tensor(x))[0]
    assert not np.allclose(train_out.detach().numpy(), om.eval()(oar.tensor(x))[0].detach().numpy())
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        getattr(oar.nn, kind)(4, 6, num_layers=2, dropout=1.5)


def test_lstm_runs_the_c_layer_and_matches_torch_bidirectional_with_state(torch):
    x, h0, c0 = f32(6, 2, 3), f32(4, 2, 5), f32(4, 2, 5)
    tm, om = torch.nn.LSTM(3, 5, num_layers=2, bidirectional=True), oar.nn.LSTM(3, 5, num_layers=2, bidirectional=True)
    _copy_weights(om, tm)
    (xo, ho, co), (xt, ht, ct) = both(torch, x, h0, c0)
    yo, (hno, cno) = om(xo, (ho, co))
    yt, (hnt, cnt) = tm(xt, (ht, ct))
    for a, b, n in ((yo, yt, "y"), (hno, hnt, "h_n"), (cno, cnt, "c_n")):
        close(a, b, what=n)
    (yo.sum() + hno.pow(2).sum() + cno.sum()).backward()
    (yt.sum() + hnt.pow(2).sum() + cnt.sum()).backward()
    for a, b, n in ((xo, xt, "x"), (ho, ht, "h0"), (co, ct, "c0")):
        close(a.grad, b.grad, what=f"grad {n}")
    grads_match(om, tm, rtol=1e-4, atol=1e-5)
    with pytest.raises(RuntimeError, match="rnn_layer_run .LSTM.: expected h0 of shape \\[2, 5\\]"):
        oar._C.rnn_layer(True, xo, om.weight_ih_l0, om.weight_hh_l0, om.bias_ih_l0, om.bias_hh_l0, oar.zeros(3, 5),
                         None)


# ---------------------------------------------------------------- weighted binary cross-entropies
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_weight_and_pos_weight_match_torch(torch, reduction):
    logits, target = f32(4, 3) * 3, (R.rand(4, 3) > 0.5).astype(np.float32)
    weight, pos_weight = np.abs(f32(4, 1)) + 0.1, np.abs(f32(3)) + 0.5
    for kw in ({"weight": weight}, {"pos_weight": pos_weight}, {"weight": weight, "pos_weight": pos_weight}):
        (xo,), (xt,) = both(torch, logits)
        ko = {k: oar.tensor(v) for k, v in kw.items()}
        kt = {k: torch.tensor(v) for k, v in kw.items()}
        lo = oar.nn.BCEWithLogitsLoss(reduction=reduction, **ko)(xo, oar.tensor(target))
        lt = torch.nn.BCEWithLogitsLoss(reduction=reduction, **kt)(xt, torch.tensor(target))
        close(lo, lt, what=f"bce_with_logits {list(kw)}")
        lo.sum().backward()
        lt.sum().backward()
        close(xo.grad, xt.grad, what=f"bce_with_logits grad {list(kw)}")
        if "pos_weight" in kw:
            continue
        (po,), (pt,) = both(torch, 1 / (1 + np.exp(-logits)))
        lo = oar.nn.functional.binary_cross_entropy(po, oar.tensor(target), ko["weight"], reduction=reduction)
        lt = torch.nn.functional.binary_cross_entropy(pt, torch.tensor(target), kt["weight"], reduction=reduction)
        close(lo, lt, what="bce weight")
        lo.sum().backward()
        lt.sum().backward()
        close(po.grad, pt.grad, rtol=1e-4, atol=1e-4, what="bce weight grad")
    with pytest.raises(ValueError, match=r"Target size \(torch.Size\(\[4\]\)\) must be the same as input size"):
        oar.nn.functional.binary_cross_entropy_with_logits(oar.zeros(4, 3), oar.zeros(4),
                                                           pos_weight=oar.ones(3))


# ---------------------------------------------------------------- IterableDataset worker processes
def make_stream(lib, n, fail_at=None):
    class Stream(lib.utils.data.IterableDataset):
        """Numbers 0..n-1, split between the workers the way torch's documentation shows."""

        def __iter__(self):
            info = lib.utils.data.get_worker_info()
            ids = range(n) if info is None else range(info.id, n, info.num_workers)
            for i in ids:
                if i == fail_at:
                    raise ValueError(f"item {i} is broken")
                yield lib.tensor([float(i), -1.0 if info is None else float(info.id)])

    return Stream()


@pytest.mark.filterwarnings("ignore:This DataLoader will create")  # torch's advice on a 2-core machine
@pytest.mark.parametrize("n, batch, workers, drop_last", [(23, 4, 2, False), (23, 4, 3, True), (10, None, 2, False),
                                                          (5, 2, 4, False)])
def test_iterable_dataset_workers_match_torch(torch, n, batch, workers, drop_last):
    got = [b.tolist() for b in oar.utils.data.DataLoader(make_stream(oar, n), batch_size=batch, num_workers=workers,
                                                         drop_last=drop_last)]
    want = [b.tolist() for b in torch.utils.data.DataLoader(make_stream(torch, n), batch_size=batch,
                                                            num_workers=workers, drop_last=drop_last)]
    assert got == want  # the same batches, from the same workers, in the same order
    serial = [b.tolist() for b in oar.utils.data.DataLoader(make_stream(oar, n), batch_size=batch,
                                                            drop_last=drop_last)]
    assert serial == [b.tolist() for b in torch.utils.data.DataLoader(make_stream(torch, n), batch_size=batch,
                                                                      drop_last=drop_last)]


def test_iterable_dataset_worker_error_names_the_worker():
    with pytest.raises(RuntimeError, match="(?s)DataLoader worker 1.*item 5 is broken"):
        list(oar.utils.data.DataLoader(make_stream(oar, 12, fail_at=5), batch_size=2, num_workers=2))


# ---------------------------------------------------------------- 3-d convolution (the video models)
@pytest.mark.parametrize("C, O, k, stride, padding, dilation, groups", [
    (3, 4, 3, 1, 1, 1, 1), (4, 6, (3, 1, 2), (2, 1, 2), (1, 0, 1), 1, 2), (2, 3, 3, 1, 2, 2, 1),
    (3, 3, (1, 3, 3), 1, (0, 1, 1), 1, 3), (2, 4, (3, 1, 1), (2, 1, 1), "valid", 1, 1)])
def test_conv3d_matches_torch(torch, C, O, k, stride, padding, dilation, groups):
    ks = (k,) * 3 if isinstance(k, int) else k
    x, w, b = f32(2, C, 5, 6, 7), f32(O, C // groups, *ks), f32(O)
    (xo, wo, bo), (xt, wt, bt) = both(torch, x, w, b)
    yo = oar.nn.functional.conv3d(xo, wo, bo, stride, padding, dilation, groups)
    yt = torch.nn.functional.conv3d(xt, wt, bt, stride, padding, dilation, groups)
    close(yo, yt, rtol=1e-4, atol=1e-4)
    gy = f32(*yt.shape)
    (yo * oar.tensor(gy)).sum().backward()
    (yt * torch.tensor(gy)).sum().backward()
    for a, c, n in ((xo, xt, "x"), (wo, wt, "weight"), (bo, bt, "bias")):
        close(a.grad, c.grad, rtol=1e-4, atol=1e-4, what=f"grad {n}")


def test_conv3d_module_and_adaptive_pool(torch):
    tm, om = torch.nn.Conv3d(2, 4, (3, 3, 1), stride=(1, 2, 1), padding=1), oar.nn.Conv3d(2, 4, (3, 3, 1), (1, 2, 1), 1)
    assert tuple(om.weight.shape) == (4, 2, 3, 3, 1)
    _copy_weights(om, tm)
    x = f32(3, 2, 4, 5, 6)
    close(om(oar.tensor(x)), tm(torch.tensor(x)), rtol=1e-4, atol=1e-4)
    close(om(oar.tensor(x[0])), tm(torch.tensor(x[0])), rtol=1e-4, atol=1e-4, what="unbatched")
    for size in ((1, 1, 1), (2, None, 3), 1):
        close(oar.nn.AdaptiveAvgPool3d(size)(oar.tensor(x)), torch.nn.AdaptiveAvgPool3d(size)(torch.tensor(x)))
    with pytest.raises(NotImplementedError, match="must divide the input's"):
        oar.nn.AdaptiveAvgPool3d(3)(oar.tensor(x))
    with pytest.raises(RuntimeError, match="conv3d: expected a 5-D input"):
        om(oar.zeros(2, 5, 6))


@pytest.mark.parametrize("cls, kw", [
    ("MaxPool3d", dict(kernel_size=(1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1))),
    ("MaxPool3d", dict(kernel_size=3, stride=1, padding=1)),
    ("MaxPool3d", dict(kernel_size=(3, 2, 2), stride=2, padding=1, ceil_mode=True)),
    ("MaxPool3d", dict(kernel_size=3, stride=2, dilation=(2, 1, 1))),
    ("AvgPool3d", dict(kernel_size=(2, 3, 3), stride=1)),
    ("AvgPool3d", dict(kernel_size=3, stride=2, padding=1))])
def test_pool3d_matches_torch(torch, cls, kw):
    (xo,), (xt,) = both(torch, f32(2, 3, 7, 8, 9))
    yo, yt = getattr(oar.nn, cls)(**kw)(xo), getattr(torch.nn, cls)(**kw)(xt)
    close(yo, yt)
    gy = f32(*yt.shape)
    (yo * oar.tensor(gy)).sum().backward()
    (yt * torch.tensor(gy)).sum().backward()
    close(xo.grad, xt.grad)


# ---------------------------------------------------------------- functions the video transformers call
def test_tensor_split_and_repeat_interleave_match_torch(torch):
    x = f32(3, 7)
    for args, kw in (((3, 1), {}), ((2,), {}), (([1, 4], 1), {}), (([0, 5, 9], 1), {}), (((2, -2), 1), {}),
                     ((), {"indices": (1,), "dim": 1}), ((), {"sections": 2})):
        got, want = oar.tensor_split(oar.tensor(x), *args, **kw), torch.tensor_split(torch.tensor(x), *args, **kw)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            close(a, b)
    for reps, dim in ((2, 1), (2, None), ([1, 0, 2], 0)):
        (xo,), (xt,) = both(torch, x)
        yo = xo.repeat_interleave(oar.tensor(reps) if isinstance(reps, list) else reps, dim)
        yt = xt.repeat_interleave(torch.tensor(reps) if isinstance(reps, list) else reps, dim)
        close(yo, yt)
        (yo * oar.tensor(np.arange(yt.numel(), dtype=np.float32).reshape(tuple(yt.shape)))).sum().backward()
        (yt * torch.arange(yt.numel(), dtype=torch.float32).reshape(yt.shape)).sum().backward()
        close(xo.grad, xt.grad, what=f"repeat_interleave grad {reps} {dim}")
    assert oar.repeat_interleave(oar.tensor([2, 0, 1])).tolist() == [0, 0, 2]
    with pytest.raises(RuntimeError, match="repeat_interleave: repeats must have the same size"):
        oar.repeat_interleave(oar.tensor(x), oar.tensor([1, 2]), 0)
