"""torch.fft: discrete Fourier transforms over complex tensors (_complex.py: GEMMs with exact
cosine and sine matrices)."""
from ._complex import fft, ifft, irfft, rfft  # noqa: F401


def fftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    """the sample frequencies of fft(n points): [0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d * n)"""
    from ._creation import tensor

    values = [(k if k < (n + 1) // 2 else k - n) / (d * n) for k in range(n)]
    return tensor(values, dtype=dtype, device=device, requires_grad=requires_grad)


def rfftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    """the sample frequencies of rfft(n points): [0, 1, ..., n // 2] / (d * n)"""
    from ._creation import tensor

    return tensor([k / (d * n) for k in range(n // 2 + 1)], dtype=dtype, device=device, requires_grad=requires_grad)
