"""Control flow as PyTorch exports it: TorchScript modules with a for loop holding an if (ONNX
Loop with M from an input, an If in its body), a while loop (Loop with M = INT64_MAX and a
condition) and a for loop appending to a list then stacked and concatenated (SequenceEmpty, a
Loop carrying the sequence with SequenceInsert in its body, ConcatFromSequence with and without
new_axis), exported with torch.onnx at opset 17. Writes DIR/<name>.onnx, the inputs as
DIR/<name>.in<k>.npy (k in the graph's input order) and torch's output as DIR/<name>.y.npy.
Usage: torch_control.py DIR. Exit 77 without torch."""
import os
import sys
import warnings

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"torch_control: skipped: {e}")
    sys.exit(77)
warnings.simplefilter("ignore")


class ForIf(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, n: int):
        h = x
        for i in range(n):
            h = torch.tanh(self.lin(h))
            if h.sum() > 0:
                h = h * 0.5
            else:
                h = h - 1.0
        return h


class While(torch.nn.Module):
    def forward(self, x):
        h = x
        k = torch.zeros([], dtype=torch.float32)
        while h.abs().sum() > 1.0:
            h = h * 0.5
            k = k + 1.0
        return h * k


class ListStack(torch.nn.Module):
    def forward(self, x, n: int):
        ys = []
        h = x
        for i in range(n):
            h = torch.tanh(h * 1.5 + 0.1 * i)
            ys.append(h)
        return torch.stack(ys, 0).sum(0) + torch.cat(ys, 1)[:, :3] * 0.5


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(18)
    cases = {"torch_for_if": (ForIf().eval(), (torch.randn(3, 4), 3), ["x", "n"]),
             "torch_while": (While().eval(), (4 * torch.randn(3, 4),), ["x"]),
             "torch_list": (ListStack().eval(), (torch.randn(2, 3), 4), ["x", "n"])}
    for name, (mod, args, names) in cases.items():
        m = torch.jit.script(mod)
        torch.onnx.export(m, args, os.path.join(out, name + ".onnx"), opset_version=17, input_names=names,
                          output_names=["y"])
        for k, a in enumerate(args):
            arr = a.numpy() if isinstance(a, torch.Tensor) else np.array(a, dtype=np.int64)
            np.save(os.path.join(out, f"{name}.in{k}.npy"), arr)
        with torch.no_grad():
            np.save(os.path.join(out, name + ".y.npy"), m(*args).numpy())
    print(f"torch_control: {len(cases)} models in {out}")


if __name__ == "__main__":
    main()
