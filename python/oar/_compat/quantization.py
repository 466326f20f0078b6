"""torch.ao.quantization: the stubs a float model holds (the identity until the model is
converted, as in torch). Converting a model with PyTorch's eager quantization flow is not
offered; oar quantizes its own way (docs/quant.md)."""
from ..nn.modules.module import Module


class QuantStub(Module):
    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x):
        return x


class DeQuantStub(QuantStub):
    pass


def _refuse(name):
    def f(*args, **kwargs):
        raise RuntimeError(f"torch.ao.quantization.{name}: PyTorch's eager quantization flow is not offered by "
                           "oar; quantize with oar's own tools (docs/quant.md)")

    f.__name__ = name
    return f


for _name in ("prepare", "prepare_qat", "convert", "fuse_modules", "fuse_modules_qat", "get_default_qconfig",
              "get_default_qat_qconfig", "QConfig", "default_observer", "default_weight_observer",
              "default_per_channel_weight_observer"):
    globals()[_name] = _refuse(_name)
