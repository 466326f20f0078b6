"""Complex tensors, torch.stft / istft and torch.fft beside torch 1.13 (python/oar/_complex.py):
values to float32 rounding of one dot product (the transforms are GEMMs with exact cosine and sine
matrices), gradients through them to the real inputs, and torch's errors."""
import numpy as np
import pytest

import oar

R = np.random.default_rng(21)


def f32(*shape):
    return R.standard_normal(shape).astype(np.float32)


def close(got, want, what, rtol=2e-6):
    got = got.numpy() if hasattr(got, "numpy") else got
    want = want.resolve_conj().numpy() if hasattr(want, "resolve_conj") else want
    assert got.shape == want.shape, f"{what}: shape {got.shape}, torch's {want.shape}"
    scale = max(float(np.abs(want).max()), 1e-6)
    err = float(np.abs(got - want).max())
    assert err <= rtol * scale, f"{what}: max |oar - torch| = {err:.3g}, torch's max |value| = {scale:.3g}"


@pytest.mark.parametrize("kw", [dict(n_fft=400, hop_length=160), dict(n_fft=256, center=False),
                                dict(n_fft=128, hop_length=32, win_length=100, normalized=True),
                                dict(n_fft=64, onesided=False), dict(n_fft=200, pad_mode="constant")])
def test_stft_is_torchs(torch, kw):
    x = f32(3, 1600)
    win = kw.get("win_length", kw["n_fft"])
    w = np.hanning(win).astype(np.float32)
    want = torch.stft(torch.from_numpy(x), window=torch.from_numpy(w), return_complex=True, **kw)
    got = oar.stft(oar.from_numpy(x), window=oar.from_numpy(w), return_complex=True, **kw)
    assert got.dtype is oar.complex64 and tuple(got.shape) == tuple(want.shape)
    close(got, want, f"stft {kw}")
    close(oar.stft(oar.from_numpy(x[0]), return_complex=False, **kw),  # 1-d signal, no window, real pairs
          torch.view_as_real(torch.stft(torch.from_numpy(x[0]), return_complex=True, **kw)), f"stft 1-d {kw}")


def test_istft_inverts_stft_as_torch(torch):
    x = f32(2, 1000)
    w = np.hanning(256).astype(np.float32)
    for kw in (dict(hop_length=64, length=1000), dict(hop_length=64), dict(hop_length=64, normalized=True),
               dict(hop_length=100, length=1100)):
        spec = torch.stft(torch.from_numpy(x), 256, window=torch.from_numpy(w), return_complex=True,
                          normalized=kw.get("normalized", False), hop_length=kw["hop_length"])
        ospec = oar.view_as_complex(oar.from_numpy(torch.view_as_real(spec).numpy().copy()))
        want = torch.istft(spec, 256, window=torch.from_numpy(w), **kw)
        close(oar.istft(ospec, 256, window=oar.from_numpy(w), **kw), want, f"istft {kw}")
    with pytest.raises(RuntimeError, match="window overlap add min"):
        oar.istft(ospec, 256, hop_length=64, window=oar.zeros(256))


@pytest.mark.parametrize("fn, kw", [("fft", {}), ("fft", dict(n=50, norm="ortho")), ("ifft", dict(dim=0)),
                                    ("rfft", {}), ("rfft", dict(n=64, norm="forward")), ("irfft", {}),
                                    ("irfft", dict(n=39)), ("ifft", dict(norm="backward"))])
def test_fft_is_torchs(torch, fn, kw):
    x = f32(6, 40)
    tx, ox = torch.from_numpy(x), oar.from_numpy(x)
    if fn == "irfft":  # a one-sided spectrum
        tx = torch.fft.rfft(tx)
        ox = oar.view_as_complex(oar.from_numpy(torch.view_as_real(tx).numpy().copy()))
    close(getattr(oar.fft, fn)(ox, **kw), getattr(torch.fft, fn)(tx, **kw), f"{fn} {kw}")
    if fn == "ifft":  # and of a complex input
        z = torch.fft.fft(tx)
        oz = oar.view_as_complex(oar.from_numpy(torch.view_as_real(z).numpy().copy()))
        close(oar.fft.ifft(oz, **kw), torch.fft.ifft(z, **kw), f"ifft of a complex input {kw}")


def test_complex_arithmetic_and_shapes_are_torchs(torch):
    a, b = f32(3, 4, 2), f32(3, 4, 2)
    ta, tb = torch.view_as_complex(torch.from_numpy(a)), torch.view_as_complex(torch.from_numpy(b))
    oa, ob = oar.view_as_complex(oar.from_numpy(a)), oar.view_as_complex(oar.from_numpy(b))
    r = f32(3, 4)
    for what, got, want in [("add", oa + ob, ta + tb), ("sub", oa - ob, ta - tb), ("mul", oa * ob, ta * tb),
                            ("div", oa / ob, ta / tb), ("real times", oa * oar.from_numpy(r), ta * torch.from_numpy(r)),
                            ("scalar", 2.5 * oa - 1, 2.5 * ta - 1), ("conj", oa.conj(), ta.conj()),
                            ("square", oa.pow(2), ta.pow(2)), ("power", oa.pow(1.5), ta.pow(1.5)),
                            ("angle", oa.angle(), ta.angle()), ("torch.angle", oar.angle(oa), torch.angle(ta)), ("transpose", oa.transpose(0, 1), ta.transpose(0, 1)),
                            ("slice", oa[1:, ::2], ta[1:, ::2]), ("reshape", oa.reshape(4, 3), ta.reshape(4, 3)),
                            ("pad", oar.nn.functional.pad(oa, (1, 2)), torch.nn.functional.pad(ta, (1, 2))),
                            ("sum", oa.sum(1), ta.sum(1))]:
        close(got, want, what)
    close(oar.abs(oa), torch.abs(ta), "abs")
    close(oar.view_as_real(oa), torch.view_as_real(ta), "view_as_real")
    close(oar.complex(oar.from_numpy(r), oar.from_numpy(r)), torch.complex(torch.from_numpy(r), torch.from_numpy(r)),
          "complex")
    close(oar.complex(oar.from_numpy(r), oar.from_numpy(r[0])), torch.complex(torch.from_numpy(r),
                                                                              torch.from_numpy(r[0])), "broadcast")
    close(oar.polar(oar.from_numpy(np.abs(r)), oar.from_numpy(r)),
          torch.polar(torch.from_numpy(np.abs(r)), torch.from_numpy(r)), "polar")
    assert oar.is_complex(oa) and not oar.is_complex(oar.from_numpy(r)) and oa.real.dtype is oar.float32
    assert oa.to(oar.complex128).dtype is oar.complex128


def test_gradients_reach_the_real_inputs(torch):
    """stft -> |.|^2 and irfft: the input gradients equal torch's (abs has torch's zero gradient at 0)"""
    x = f32(2, 600)
    x[0, :300] = 0  # exact zeros in the spectrum's first frames
    tx = torch.from_numpy(x.copy()).requires_grad_()
    ox = oar.from_numpy(x.copy())
    ox.requires_grad_()
    g = f32(2, 129, 1 + 600 // 64)
    w = np.hanning(256).astype(np.float32)
    (torch.stft(tx, 256, 64, window=torch.from_numpy(w), return_complex=True).abs() * torch.from_numpy(g)).sum() \
        .backward()
    (oar.stft(ox, 256, 64, window=oar.from_numpy(w), return_complex=True).abs() * oar.from_numpy(g)).sum().backward()
    assert np.isfinite(ox.grad.numpy()).all()
    close(ox.grad, tx.grad, "d stft-magnitude / dx", rtol=1e-5)
    s = f32(3, 21, 2)
    ts = torch.from_numpy(s.copy()).requires_grad_()
    os_ = oar.from_numpy(s.copy())
    os_.requires_grad_()
    gy = f32(3, 40)
    (torch.fft.irfft(torch.view_as_complex(ts)) * torch.from_numpy(gy)).sum().backward()
    (oar.fft.irfft(oar.view_as_complex(os_)) * oar.from_numpy(gy)).sum().backward()
    close(os_.grad, ts.grad, "d irfft / d spectrum")


def test_complex_errors():
    z = oar.view_as_complex(oar.from_numpy(f32(3, 2)))
    with pytest.raises(RuntimeError, match="return_complex"):
        oar.stft(oar.randn(100), 16)
    for f in (oar.exp, oar.relu, oar.nn.functional.max_pool2d):  # no complex form: refused, with what to do
        with pytest.raises(TypeError, match=r"complex tensors are not supported here; take its \.real"):
            f(z) if f is not oar.nn.functional.max_pool2d else f(z, 2)
    with pytest.raises(TypeError, match="must be Tensor|expected input 0 to be a Tensor"):
        oar.ops.exp(z)
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        oar.view_as_complex(oar.randn(3, 3))
    with pytest.raises(TypeError, match="imaginary part"):
        z.to(oar.float32)
    with pytest.raises(TypeError, match="dtype of complex tensors"):
        oar.zeros(2, dtype=oar.complex64)
