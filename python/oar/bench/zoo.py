"""`python -m oar.bench --zoo`: oar.examples.zoo_torch (plain PyTorch code) trained by PyTorch and,
unchanged, by oar (through oar.mock_torch()), eagerly and compiled with oar.jit.to_static, in the
same process. Every oar model starts from torch's initial weights and gets torch's batches, so the
first losses must agree (printed beside the times). Times: per repeat, the median of `steps` step
times of each mode in turn (the modes alternate, so load on a shared machine hits all); then the
median of those medians with min and max, and oar / torch ratios (below 1: oar is faster)."""
import importlib.util
import json
import os
import statistics
import time

MODES = ("torch", "oar_eager", "oar_compiled")


def load(use_oar):
    """zoo_torch.py as a fresh module: `import torch` inside gives PyTorch, or oar under the switch."""
    import oar

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "zoo_torch.py")
    spec = importlib.util.spec_from_file_location("zoo_torch_oar" if use_oar else "zoo_torch_pytorch", path)
    mod = importlib.util.module_from_spec(spec)
    if use_oar:
        with oar.mock_torch():
            spec.loader.exec_module(mod)
    else:
        spec.loader.exec_module(mod)
    return mod


def runners(name, batch=None):
    """{mode: (step callable, inputs)}: the same workload in each mode, from torch's weights."""
    import oar

    pt, zo = load(False), load(True)
    t_model, _, t_inputs, t_step = pt.make(name, batch)
    weights = {k: v.detach().numpy().copy() for k, v in t_model.state_dict().items()}
    out = {"torch": (t_step, t_inputs)}
    for mode in ("oar_eager", "oar_compiled"):
        model, _, _, step = zo.make(name, batch)
        model.load_state_dict({k: oar.tensor(v) for k, v in weights.items()})
        inputs = tuple(oar.tensor(t.numpy().copy()) for t in t_inputs)
        out[mode] = (oar.jit.to_static(step) if mode == "oar_compiled" else step, inputs)
    return out


def run_step(step, inputs):
    """One step; the inputs of the next (lstm-lm carries its hidden state) and the loss."""
    r = step(*inputs)
    if isinstance(r, tuple):  # (loss, h, c)
        return inputs[:2] + tuple(r[1:]), r[0]
    return inputs, r


def check_losses(name, batch, steps=2):
    """The first losses of every mode, from fresh models (they must agree to fp32 rounding)."""
    losses = {}
    for mode, (step, inputs) in runners(name, batch).items():
        losses[mode] = []
        for _ in range(steps):
            inputs, loss = run_step(step, inputs)
            losses[mode].append(round(float(loss.item()), 5))
    return losses


def time_workload(name, batch, steps, repeats, warmup=3):
    modes = runners(name, batch)
    state = {m: inputs for m, (_, inputs) in modes.items()}
    for m, (step, _) in modes.items():
        for _ in range(warmup):
            state[m], loss = run_step(step, state[m])
        loss.item()
    per_repeat = {m: [] for m in modes}
    for _ in range(repeats):
        for m, (step, _) in modes.items():
            times = []
            for _ in range(steps):
                t0 = time.perf_counter()
                state[m], loss = run_step(step, state[m])
                loss.item()  # the step is done (torch and oar run ops synchronously on the CPU anyway)
                times.append((time.perf_counter() - t0) * 1e3)
            per_repeat[m].append(statistics.median(times))
    res = {m: {"median_ms": round(statistics.median(v), 3), "min_ms": round(min(v), 3), "max_ms": round(max(v), 3)}
           for m, v in per_repeat.items()}
    for m in ("oar_eager", "oar_compiled"):
        res[f"ratio_{m}_over_torch"] = round(res[m]["median_ms"] / res["torch"]["median_ms"], 3)
    return res


def main(workloads, steps, repeats, threads, cpu):
    import torch

    import oar

    torch.set_num_threads(threads)
    oar.set_num_threads(threads)
    out = {"benchmark": "zoo_from_python", "cpu": cpu, "threads": threads, "steps": steps, "repeats": repeats,
           "versions": {"torch": torch.__version__, "oar": oar.__version__}, "results": {}}
    for name in workloads:
        out["results"][name] = {"first_losses": check_losses(name, None),
                                **time_workload(name, None, steps, repeats)}
        print(json.dumps({name: out["results"][name]}), flush=True)
    print(json.dumps(out, indent=1))
