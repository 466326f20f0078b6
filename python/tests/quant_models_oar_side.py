"""The oar half of test_torch_quantization.py's model checks, in its own interpreter so that
`import torch` inside torchvision resolves to oar (the test's process keeps the real torch).

    python quant_models_oar_side.py REQUEST.pkl RESULT.pkl

REQUEST: [(name, kwargs, state_dict, calibration batch, input)] (numpy). RESULT: per model the
dequantized output of the converted model, and the output of torchvision's own builder with
quantize=True (its fbgemm default), or the error."""
import pickle
import sys
import warnings

import oar

oar.mock_torch()
warnings.filterwarnings("ignore", message="Failed to load image Python extension")
import torch  # noqa: E402  (oar, through the switch)
import torchvision  # noqa: E402

from quant_flow_util import quantized_output  # noqa: E402


def main(request_path, result_path):
    with open(request_path, "rb") as f:
        req = pickle.load(f)
    result = {}
    for name, kwargs, sd, calib, x in req:
        try:
            y = quantized_output(torch, torchvision, name, kwargs, sd, calib, x)
            with torch.no_grad():
                built = getattr(torchvision.models.quantization, name)(weights=None, quantize=True, **kwargs)
                result[name] = {"y": y, "builder_y": built(torch.from_numpy(x)).numpy().copy(),
                                "builder_fc": repr(built.fc if hasattr(built, "fc") else built.classifier)}
        except Exception as e:  # reported per model by the test
            import traceback

            result[name] = {"error": f"{type(e).__name__}: {e}\n{traceback.format_exc()[-2000:]}"}
    with open(result_path, "wb") as f:
        pickle.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
