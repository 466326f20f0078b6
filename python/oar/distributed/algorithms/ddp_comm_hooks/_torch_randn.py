"""torch 1.13's CPU normal draws in NumPy: what `torch.manual_seed(seed)` followed by `torch.randn(...)`
calls (float32) gives, so PowerSGD's first Q is the one torch draws from the same seed. The stream is
mt19937 (torch's seeding is NumPy's legacy integer seeding); below 16 elements each value comes from two
53-bit uniforms by Box-Muller in double, the sine kept for the next value; from 16 on, 24-bit uniforms
are transformed in blocks of 16 (the first eight give the radii, the next eight the angles), a last
partial block redrawn over the tail. Values agree with torch's to a float32 rounding (torch's vector
log/sin/cos against NumPy's). float32 only: torch draws float64 through other paths, so a float64
bucket gets these values widened, not torch's float64 draw."""
import numpy as np


class TorchNormal:
    """torch.manual_seed(seed); then each randn(shape) is what torch.randn(*shape) returns next."""

    def __init__(self, seed):
        self._mt = np.random.RandomState(int(seed))
        self._cached = None   # the sine of the last small draw's pair, torch's cached normal

    def _u32(self, n):
        return self._mt.randint(0, 2 ** 32, size=n, dtype=np.uint32)

    def randn(self, shape):
        n = int(np.prod(shape))
        out = self._blocks(n) if n >= 16 else self._pairs(n)
        return out.reshape(shape)

    def _pairs(self, n):
        out = np.empty(n, dtype=np.float64)
        for i in range(n):
            if self._cached is not None:
                out[i], self._cached = self._cached, None
                continue
            w = self._u32(4).astype(np.uint64)
            u1, u2 = (float(((w[k] << np.uint64(32)) | w[k + 1]) & np.uint64(2 ** 53 - 1)) * 2.0 ** -53 for k in (0, 2))
            radius = np.sqrt(-2.0 * np.log(1.0 - u2))
            self._cached = radius * np.sin(2.0 * np.pi * u1)
            out[i] = radius * np.cos(2.0 * np.pi * u1)
        return out.astype(np.float32)

    def _uniform(self, n):
        return (self._u32(n) & np.uint32(0xFFFFFF)).astype(np.float32) * np.float32(2.0 ** -24)

    def _blocks(self, n):
        def box_muller(u):
            radius = np.sqrt(np.float32(-2) * np.log(np.float32(1) - u[:8]))
            theta = np.float32(2 * np.pi) * u[8:]
            return np.concatenate([radius * np.cos(theta), radius * np.sin(theta)])

        u = self._uniform(n)
        out = np.empty(n, dtype=np.float32)
        for i in range(0, n - 15, 16):
            out[i:i + 16] = box_muller(u[i:i + 16])
        if n % 16:
            out[n - 16:] = box_muller(self._uniform(16))
        return out
