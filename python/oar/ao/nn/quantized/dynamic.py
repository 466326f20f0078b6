"""torch.nn.quantized.dynamic: Linear layers with int8 weights whose input is quantized per call
from its own range (oar's choose_qparams, u8 over the full 8 bits as torch's qnnpack and onednn
engines do; fbgemm's 7-bit inputs are not reproduced), multiplied in int32 and scaled back to
float32 with the bias (qlinear to f32)."""
from .... import _dtype as D
from ...._ops import call
from . import modules as nnq


def linear(x, w, bias, activation=nnq._NONE, what="dynamic quantized Linear"):
    """x (float32) quantized over its own range, times the qint8 weight w in int32, to float32 with the bias"""
    if x.dtype is not D.float32:
        raise TypeError(f"{what}: expected a float32 input, got {x.dtype!r}")
    scale, zero_point = call("choose_qparams", (x,), {"dtype": D.uint8.code, "symmetric": 0})
    codes = call("quantize", (x, scale, zero_point), {"axis": -1, "dtype": D.uint8.code})
    return call("qlinear", (codes, scale, zero_point, w.codes, w._scale, bias, None, None, None),
                {"activation": activation, "dtype": D.float32.code})


class Linear(nnq.Linear):
    _FLOAT_MODULE = ("Linear",)

    def _get_name(self):
        return "DynamicQuantized" + type(self).__name__

    def forward(self, x):
        return linear(x, self._qweight, self.bias_, self._activation)

    @classmethod
    def from_float(cls, mod):
        lin = mod[0] if type(mod).__name__ == "LinearReLU" else mod
        if not hasattr(mod, "qconfig") or mod.qconfig is None:
            raise AssertionError("Input float module must have qconfig defined")
        if type(lin).__name__ not in cls._FLOAT_MODULE:
            raise TypeError(f"{cls.__name__}.from_float: expected Linear, got {type(lin).__name__}")
        q = cls(lin.in_features, lin.out_features, lin.bias is not None)
        bias = None if lin.bias is None else lin.bias.detach().to(D.float32)
        q._set(nnq._quantize_weight(lin.weight.detach(), mod.qconfig.weight()), bias, 1.0, 0)
        return q

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, dtype=torch.qint8, "
                f"qscheme={self._qweight.qscheme()!r}")


class LinearReLU(Linear):
    _activation = nnq._RELU


from .dynamic_rnn import GRU, GRUCell, LSTM, LSTMCell, RNNCell  # noqa: E402,F401  (they use linear above)
