"""Complex tensors with torch's API, for the spectral code real models use: torch.stft / istft,
torch.fft, view_as_real / view_as_complex, abs, arithmetic, shape ops and padding.

A ComplexTensor is its real and imaginary parts, two oar tensors of one shape and float dtype
(complex64 over float32, complex128 over float64). Every operation is written with oar's real
ops on the parts, so autograd, to_static and the devices work unchanged and a gradient reaches
the real inputs it came from. The transforms are discrete Fourier transforms as real GEMMs with
cosine and sine matrices (exact angles: k*n is reduced mod N in integers before the float
division), O(N^2) per transform rather than an FFT's O(N log N): for the frame sizes of audio
front ends (N up to a few thousand) a GEMM is fast and its error is float rounding of one dot
product. The torch functions that take complex tensors are listed at the end (_kinds.implements)."""
import builtins
import math
import numbers

from . import _C
from . import _dtype as D
from . import _kinds


class _ComplexDtype(D.dtype):
    """torch.complex64 / complex128: the dtype of a ComplexTensor whose parts are `part`."""

    __slots__ = ("part",)

    def __init__(self, name, part):
        self.name, self.itemsize, self.is_floating_point, self.is_signed = name, 2 * part.itemsize, False, True
        self.part = part

    is_complex = True

    @property
    def code(self):
        raise TypeError(f"torch.{self.name} is the dtype of complex tensors: make one with torch.complex, "
                        "torch.view_as_complex or a transform (torch.stft, torch.fft)")


complex64 = _ComplexDtype("complex64", D.float32)
complex128 = _ComplexDtype("complex128", D.float64)
D.ALIASES.update({"complex64": complex64, "cfloat": complex64, "complex128": complex128, "cdouble": complex128})
_BY_PART = {D.float32: complex64, D.float64: complex128}


def _F():
    from . import _functions

    return _functions


def _like(t, value):
    from . import _creation

    return _creation.full_like(t, value)


@_kinds.register_as("complex", "take its .real, .imag or .abs() first")
class ComplexTensor:
    """real + i * imag, two oar tensors of one shape and dtype."""

    __slots__ = ("real", "imag", "__weakref__")
    is_quantized = False

    def __init__(self, real, imag):
        if real.shape != imag.shape or real.dtype is not imag.dtype:
            raise ValueError(f"complex tensor: real and imaginary parts must agree, got {tuple(real.shape)} "
                             f"{real.dtype!r} and {tuple(imag.shape)} {imag.dtype!r}")
        if real.dtype not in _BY_PART:
            raise TypeError(f"complex tensor: expected float32 or float64 parts, got {real.dtype!r}")
        self.real, self.imag = real, imag

    def _map(self, f):
        return ComplexTensor(f(self.real), f(self.imag))

    dtype = property(lambda self: _BY_PART[self.real.dtype])
    shape = property(lambda self: self.real.shape)
    ndim = property(lambda self: self.real.ndim)
    device = property(lambda self: self.real.device)
    requires_grad = property(lambda self: self.real.requires_grad or self.imag.requires_grad)

    def size(self, dim=None):
        return self.real.size(dim)

    def dim(self):
        return self.real.ndim

    def numel(self):
        return self.real.numel()

    def __len__(self):
        return len(self.real)

    def is_complex(self):
        return True

    def is_floating_point(self):
        return False

    # moving values: the same on both parts
    def view(self, *shape):
        return self._map(lambda t: t.view(*shape))

    def reshape(self, *shape):
        return self._map(lambda t: t.reshape(*shape))

    def permute(self, *dims):
        return self._map(lambda t: t.permute(*dims))

    def transpose(self, dim0, dim1):
        return self._map(lambda t: t.transpose(dim0, dim1))

    def flatten(self, start_dim=0, end_dim=-1):
        return self._map(lambda t: t.flatten(start_dim, end_dim))

    def squeeze(self, *dim):
        return self._map(lambda t: t.squeeze(*dim))

    def unsqueeze(self, dim):
        return self._map(lambda t: t.unsqueeze(dim))

    def contiguous(self, memory_format=None):
        return self._map(lambda t: t.contiguous())

    def clone(self, memory_format=None):
        return self._map(lambda t: t.clone())

    def detach(self):
        return self._map(lambda t: t.detach())

    def chunk(self, chunks, dim=0):
        return tuple(ComplexTensor(r, i) for r, i in zip(self.real.chunk(chunks, dim), self.imag.chunk(chunks, dim)))

    def __getitem__(self, index):
        return self._map(lambda t: t[index])

    def to(self, *args, **kwargs):
        target = args[0] if args else kwargs.get("dtype")
        if isinstance(target, _ComplexDtype):
            return self._map(lambda t: t.to(target.part))
        if isinstance(target, D.dtype):
            raise TypeError(f"to(): casting a complex tensor to {target!r} would drop its imaginary part; take "
                            ".real or .abs() first")
        return self._map(lambda t: t.to(*args, **kwargs))

    def cpu(self):
        return self._map(lambda t: t.cpu())

    # values
    def abs(self):
        return complex_abs(self)

    def angle(self):
        return _F().atan2(self.imag, self.real)

    def conj(self):
        return ComplexTensor(self.real, -self.imag)

    def __neg__(self):
        return self._map(lambda t: -t)

    def __add__(self, other):
        o = _as_complex(other)
        return ComplexTensor(self.real + o.real, self.imag + o.imag)

    __radd__ = __add__

    def __sub__(self, other):
        o = _as_complex(other)
        return ComplexTensor(self.real - o.real, self.imag - o.imag)

    def __rsub__(self, other):
        return _as_complex(other) - self

    def __mul__(self, other):
        if _is_real(other):
            return self._map(lambda t: t * other)
        o = _as_complex(other)
        return ComplexTensor(self.real * o.real - self.imag * o.imag, self.real * o.imag + self.imag * o.real)

    __rmul__ = __mul__

    def __truediv__(self, other):
        if _is_real(other):
            return self._map(lambda t: t / other)
        o = _as_complex(other)
        den = o.real * o.real + o.imag * o.imag
        return ComplexTensor((self.real * o.real + self.imag * o.imag) / den,
                             (self.imag * o.real - self.real * o.imag) / den)

    def __rtruediv__(self, other):
        return _as_complex(other) / self

    def pow(self, exponent):
        """a real power: z * z for 2, else polar |z|^p (cos p theta, sin p theta)"""
        if exponent == 2:
            return self * self
        if not isinstance(exponent, numbers.Real):
            raise NotImplementedError("pow() of a complex tensor: only real exponents are offered")
        F = _F()
        r, theta = F.pow(complex_abs(self), exponent), F.mul(self.angle(), exponent)
        return ComplexTensor(F.mul(r, F.cos(theta)), F.mul(r, F.sin(theta)))

    __pow__ = pow

    def sum(self, dim=None, keepdim=False):
        F = _F()
        f = (lambda t: F.sum(t)) if dim is None else (lambda t: F.sum(t, dim, keepdim))
        return self._map(f)

    def mean(self, dim=None, keepdim=False):
        F = _F()
        f = (lambda t: F.mean(t)) if dim is None else (lambda t: F.mean(t, dim, keepdim))
        return self._map(f)

    def numpy(self):
        return self.real.detach().numpy() + 1j * self.imag.detach().numpy()

    def __repr__(self):
        import numpy as np

        body = np.array2string(self.numpy(), precision=4, separator=", ", prefix="tensor(")
        return f"tensor({body}, dtype=torch.{self.dtype.name})"


def _is_real(v):  # a number or a plain tensor
    return isinstance(v, (numbers.Real, _C.TensorBase))


def _as_complex(v):
    if isinstance(v, ComplexTensor):
        return v
    if isinstance(v, _C.TensorBase):
        return ComplexTensor(v, _like(v, 0))
    if isinstance(v, numbers.Complex):
        return _ScalarComplex(v)
    raise TypeError(f"complex arithmetic: expected a number or a tensor, got {type(v).__name__}")


class _ScalarComplex:
    """a Python number as (real, imag) for the arithmetic above"""

    def __init__(self, z):
        z = builtins.complex(z)
        self.real, self.imag = z.real, z.imag


# ------------------------------------------------------------------ functions on complex tensors
def complex_abs(z):
    """|z| = sqrt(re^2 + im^2), with torch's gradient 0 where z = 0 (not sqrt's infinite slope)"""
    F = _F()
    mag2 = z.real * z.real + z.imag * z.imag
    nonzero = F.gt(mag2, 0)
    return F.where(nonzero, F.sqrt(F.where(nonzero, mag2, _like(mag2, 1))), _like(mag2, 0))


def moved(method):
    def impl(z, *args, **kwargs):
        return getattr(z, method)(*args, **kwargs)

    impl.__name__ = method
    return impl


def pad(z, pad, mode="constant", value=None):
    from .nn import functional as NF

    if value not in (None, 0, 0.0):
        raise NotImplementedError("pad of a complex tensor: only zero padding values are offered")
    return z._map(lambda t: NF.pad(t, pad, mode))


def view_as_real(z):
    """the parts as a last dimension of size 2 (a copy here: the parts are separate tensors)"""
    if not isinstance(z, ComplexTensor):
        raise RuntimeError("view_as_real is only supported for complex tensors")
    return _F().stack([z.real, z.imag], -1)


def view_as_complex(x):
    if isinstance(x, ComplexTensor) or x.ndim == 0 or x.shape[-1] != 2:
        raise RuntimeError(f"Tensor must have a last dimension of size 2, got shape {tuple(getattr(x, 'shape', ()))}")
    if x.dtype not in _BY_PART:
        raise RuntimeError(f"view_as_complex is only supported for float and double tensors, but got a tensor of "
                           f"scalar type: {x.dtype!r}")
    F = _F()
    return ComplexTensor(F.select(x, -1, 0), F.select(x, -1, 1))


def complex(real, imag):
    if real.dtype is not imag.dtype or real.dtype not in _BY_PART:
        raise RuntimeError(f"Expected both inputs to be Float or Double tensors but got {real.dtype!r} and "
                           f"{imag.dtype!r}")
    if real.shape != imag.shape:  # broadcast, as torch does
        n = max(real.ndim, imag.ndim)
        a, b = (1,) * (n - real.ndim) + tuple(real.shape), (1,) * (n - imag.ndim) + tuple(imag.shape)
        if any(p != q and 1 not in (p, q) for p, q in zip(a, b)):
            raise RuntimeError(f"complex: the shapes {tuple(real.shape)} and {tuple(imag.shape)} do not broadcast")
        shape = [max(p, q) for p, q in zip(a, b)]
        real, imag = real.expand(*shape).contiguous(), imag.expand(*shape).contiguous()
    return ComplexTensor(real, imag)


def polar(abs, angle):
    F = _F()
    return ComplexTensor(abs * F.cos(angle), abs * F.sin(angle))


def is_complex(input):
    return isinstance(input, ComplexTensor)


def real(input):
    return input.real if isinstance(input, ComplexTensor) else input


def imag(input):
    if not isinstance(input, ComplexTensor):
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return input.imag


# ------------------------------------------------------------------ discrete Fourier transforms
_MATRICES = {}


def _cos_sin(n, m, size, dtype, device):
    """cos and sin of 2 pi k j / size for k < n (rows), j < m (columns), exact angles: k*j mod size
    in integers, then one float64 division, then the dtype"""
    key = (n, m, size, dtype.name, str(device))
    hit = _MATRICES.get(key)
    if hit is None:
        from . import _creation as C

        F = _F()
        k = C.arange(n, dtype=D.int64).reshape(n, 1)
        j = C.arange(m, dtype=D.int64).reshape(1, m)
        angle = F.remainder(k * j, size).to(D.float64) * (2 * math.pi / size)
        hit = (F.cos(angle).to(dtype).to(device), F.sin(angle).to(dtype).to(device))
        if len(_MATRICES) > 64:
            _MATRICES.clear()
        _MATRICES[key] = hit
    return hit


def _last(x, dim):
    """x with dim moved last (the transforms run on the last dimension)"""
    return x if dim in (-1, x.ndim - 1) else x.transpose(dim, -1)


def _fit(x, n, what):
    """x's last dimension cut or zero-padded to n"""
    from .nn import functional as NF

    have = x.shape[-1]
    if n is None or n == have:
        return x
    if n < 1:
        raise RuntimeError(f"{what}: Invalid number of data points ({n}) specified")
    if n < have:
        return x[..., :n]
    return x._map(lambda t: NF.pad(t, (0, n - have))) if isinstance(x, ComplexTensor) else NF.pad(x, (0, n - have))


def _scale(norm, n, forward, what):
    if norm in (None, "backward"):
        return 1.0 if forward else 1.0 / n
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    if norm == "forward":
        return 1.0 / n if forward else 1.0
    raise ValueError(f"{what}: Invalid normalization mode: {norm}")


def _dft(re, im, size, out_bins, inverse):
    """sum_k x_k e^(-+2 pi i k j / size) for j < out_bins, x = re + i im over the last dim (im may be None)"""
    c, s = _cos_sin(re.shape[-1], out_bins, size, re.dtype, re.device)
    sign = 1.0 if inverse else -1.0
    rc, rs = re @ c, re @ s
    if im is None:
        return ComplexTensor(rc, rs * sign)
    ic, is_ = im @ c, im @ s
    return ComplexTensor(rc - sign * is_, ic + sign * rs)


def _real_or_complex(x, what):
    if isinstance(x, ComplexTensor):
        return x.real, x.imag
    if x.dtype not in _BY_PART:
        x = x.to(D.float32)
    return x, None


def _full_dft(input, n, dim, norm, inverse, what):
    """fft / ifft: every bin of the (n-point) transform along dim"""
    x = _fit(_last(input, dim), n, what)
    size = x.shape[-1]
    re, im = _real_or_complex(x, what)
    out = _dft(re, im, size, size, inverse) * _scale(norm, size, not inverse, what)
    return _last(out, dim)


def fft(input, n=None, dim=-1, norm=None):
    return _full_dft(input, n, dim, norm, False, "fft")


def ifft(input, n=None, dim=-1, norm=None):
    return _full_dft(input, n, dim, norm, True, "ifft")


def rfft(input, n=None, dim=-1, norm=None):
    if isinstance(input, ComplexTensor):
        raise RuntimeError("rfft expects a real input tensor, but got ComplexFloat")
    x = _fit(_last(input, dim), n, "rfft")
    size = x.shape[-1]
    re, _ = _real_or_complex(x, "rfft")
    out = _dft(re, None, size, size // 2 + 1, False) * _scale(norm, size, True, "rfft")
    return _last(out, dim)


def irfft(input, n=None, dim=-1, norm=None):
    """the real signal of n points (2 * (bins - 1) by default) whose one-sided spectrum is input; the
    imaginary parts of the zero and (even n) Nyquist bins are ignored, as torch's c2r transform does"""
    x = _last(input if isinstance(input, ComplexTensor) else ComplexTensor(input, _like(input, 0)), dim)
    size = 2 * (x.shape[-1] - 1) if n is None else n
    if size < 1:
        raise RuntimeError(f"irfft: Invalid number of data points ({size}) specified")
    bins = size // 2 + 1
    x = _fit(x, bins, "irfft")
    out = _irfft_bins(x.real, x.imag, size) * _scale(norm, size, False, "irfft")
    return _last(out, dim)


def _irfft_bins(re, im, size):
    """x_j = sum_k w_k (re_k cos(2 pi k j / size) - im_k sin(...)), w = 1 for bin 0 and the Nyquist bin of an
    even size, else 2 (the conjugate half the one-sided spectrum leaves out)"""
    from . import _creation as C

    bins = re.shape[-1]
    c, s = _cos_sin(bins, size, size, re.dtype, re.device)
    w = C.full((bins, 1), 2.0, dtype=re.dtype)
    w[0] = 1.0
    if size % 2 == 0 and bins == size // 2 + 1:
        w[bins - 1] = 1.0
    if str(re.device) != "cpu":
        w = w.to(re.device)
    return re @ (c * w) - im @ (s * w)


def _window(window, win_length, n_fft, dtype, device, what):
    from . import _creation as C
    from .nn import functional as NF

    if window is None:
        window = C.ones(win_length, dtype=dtype)
    if window.ndim != 1 or window.shape[0] != win_length:
        raise RuntimeError(f"{what}: expected a 1D window tensor of size equal to win_length={win_length}, but got "
                           f"window with size {tuple(window.shape)}")
    if win_length < n_fft:
        left = (n_fft - win_length) // 2
        window = NF.pad(window, (left, n_fft - win_length - left))
    return window.to(dtype).to(device)


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",
         normalized=False, onesided=None, return_complex=None):
    """torch.stft: frames of n_fft samples every hop_length (the signal reflect-padded by n_fft // 2 when
    center), times the window (centred in n_fft), transformed: (batch?, bins, frames)."""
    from .nn import functional as NF

    if isinstance(input, ComplexTensor):
        raise NotImplementedError("stft of a complex signal is not offered")
    if return_complex is None:
        raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will further "
                           "require that return_complex=True in a future PyTorch release.")
    if input.ndim not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {input.ndim}D")
    hop = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    if not 0 < win_length <= n_fft or hop <= 0:
        raise RuntimeError(f"stft: expected 0 < win_length <= n_fft and hop_length > 0, got n_fft={n_fft}, "
                           f"hop_length={hop}, win_length={win_length}")
    x = input if input.ndim == 2 else input.unsqueeze(0)
    if x.dtype not in _BY_PART:
        x = x.to(D.float32)
    if center:
        x = NF.pad(x.unsqueeze(1), (n_fft // 2, n_fft // 2), pad_mode).squeeze(1)
    length = x.shape[-1]
    if not 0 < n_fft <= length:
        raise RuntimeError(f"stft: expected 0 < n_fft <= {length}, but got n_fft={n_fft}")
    frames = _frames(x, n_fft, hop) * _window(window, win_length, n_fft, x.dtype, x.device, "stft")
    one_sided = True if onesided is None else onesided
    spec = _dft(frames, None, n_fft, n_fft // 2 + 1 if one_sided else n_fft, False).transpose(-1, -2)
    if normalized:
        spec = spec * (1.0 / math.sqrt(n_fft))
    if input.ndim == 1:
        spec = spec.squeeze(0)
    return spec if return_complex else view_as_real(spec)


def _frames(x, size, hop):
    """x (batch, length) -> (batch, frames, size): frame t holds x[t * hop : t * hop + size]"""
    from . import _creation as C

    count = 1 + (x.shape[-1] - size) // hop
    index = (C.arange(count, dtype=D.int64).reshape(count, 1) * hop + C.arange(size, dtype=D.int64)).reshape(-1)
    return _F().index_select(x, 1, index).reshape(x.shape[0], count, size)


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False, onesided=None,
          length=None, return_complex=False):
    """torch.istft: each frame's inverse transform times the window, overlap-added, divided by the
    overlap-added squared window (which must not vanish), trimmed by n_fft // 2 when center."""
    from .nn import functional as NF

    if not isinstance(input, ComplexTensor):
        raise RuntimeError("istft requires a complex-valued input tensor")
    if return_complex:
        raise NotImplementedError("istft(return_complex=True) is not offered")
    hop = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    z = input if input.ndim == 3 else input.unsqueeze(0)
    bins, count = z.shape[-2], z.shape[-1]
    one_sided = bins != n_fft if onesided is None else onesided
    if one_sided and bins != n_fft // 2 + 1:
        raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of the input tensor to match "
                           f"n_fft / 2 + 1 when onesided=True, but got {bins}")
    if normalized:
        z = z * math.sqrt(n_fft)
    z = z.transpose(-1, -2)  # (batch, frames, bins)
    if one_sided:
        frames = _irfft_bins(z.real, z.imag, n_fft) * (1.0 / n_fft)
    else:
        frames = _dft(z.real, z.imag, n_fft, n_fft, True).real * (1.0 / n_fft)
    win = _window(window, win_length, n_fft, frames.dtype, frames.device, "istft")
    frames = frames * win
    total = n_fft + hop * (count - 1)
    y = NF.fold(frames.transpose(1, 2), (1, total), (1, n_fft), stride=(1, hop)).reshape(z.shape[0], total)
    squares = (win * win).reshape(1, n_fft, 1).expand(1, n_fft, count)
    envelope = NF.fold(squares, (1, total), (1, n_fft), stride=(1, hop)).reshape(total)
    start = n_fft // 2 if center else 0
    end = start + length if length is not None else (total - n_fft // 2 if center else total)
    stop = min(end, total)
    y, envelope = y[:, start:stop], envelope[start:stop]
    low = float(_F().amin(envelope.abs()).item()) if envelope.numel() else 1.0
    if low < 1e-11:
        raise RuntimeError(f"istft: window overlap add min: {low:g} (the window and hop_length must overlap so "
                           "that no sample is multiplied by zero)")
    y = y / envelope
    if end > total:
        y = NF.pad(y, (0, end - total))
    return y if input.ndim == 3 else y.squeeze(0)


_kinds.implements(ComplexTensor, {
    "abs": complex_abs, "pad": pad, "transpose": moved("transpose"), "flatten": moved("flatten"),
    "chunk": moved("chunk"), "reshape": moved("reshape"), "permute": moved("permute"), "squeeze": moved("squeeze"),
    "unsqueeze": moved("unsqueeze"), "sum": moved("sum"), "mean": moved("mean"), "angle": moved("angle")})
