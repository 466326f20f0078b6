"""QuantStub / DeQuantStub: where a float model's quantized region starts and ends. The identity
until convert() swaps them for Quantize / DeQuantize."""
from ...nn.modules.module import Module


class _Stub(Module):
    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x):
        return x


class QuantStub(_Stub):
    """where quantization starts: convert() makes it a Quantize with the observed scale"""


class DeQuantStub(_Stub):
    """where it ends: convert() makes it a DeQuantize"""


class QuantWrapper(Module):
    """module between a QuantStub and a DeQuantStub."""

    def __init__(self, module):
        super().__init__()
        qconfig = getattr(module, "qconfig", None)
        self.add_module("quant", QuantStub(qconfig))
        self.add_module("dequant", DeQuantStub(qconfig))
        self.add_module("module", module)
        self.train(module.training)

    def forward(self, X):
        return self.dequant(self.module(self.quant(X)))
