"""PyTorch's eager post-training quantization flow on one of torchvision's quantizable models,
written once and run by torch (the oracle) and by oar under the torch switch
(quant_models_oar_side.py, bench/python_quantized_vs_torch.py): build the float model, take the
given weights, fuse, observe with torchvision's qnnpack qconfig, calibrate on the given batch,
convert, run."""
import numpy as np


def quantized_model(torch, torchvision, name, kwargs, state_dict, calib):
    model = getattr(torchvision.models.quantization, name)(weights=None, quantize=False, **kwargs).eval()
    model.load_state_dict({k: torch.from_numpy(np.array(v, order="C")) for k, v in state_dict.items()})
    model.fuse_model()
    Q = torch.ao.quantization
    model.qconfig = Q.QConfig(activation=Q.default_observer, weight=Q.default_weight_observer)
    Q.prepare(model, inplace=True)
    with torch.no_grad():
        model(torch.from_numpy(calib))
        Q.convert(model, inplace=True)
    return model


def quantized_output(torch, torchvision, name, kwargs, state_dict, calib, x):
    model = quantized_model(torch, torchvision, name, kwargs, state_dict, calib)
    with torch.no_grad():
        return model(torch.from_numpy(x)).numpy().copy()
