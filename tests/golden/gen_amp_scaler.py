#!/usr/bin/env python3
"""Golden values for oar's GradScaler (tests/test_amp.c reads tests/golden/amp_scaler.txt).

Run with Debian's python3-torch:  /usr/bin/python3 tests/golden/gen_amp_scaler.py
torch 1.13's GradScaler needs CUDA (its _amp_update_scale_ and
_amp_foreach_non_finite_check_and_unscale_ have no CPU kernels), so this script runs its
documented algorithm with torch f32 tensors on the CPU: the loss times the scale goes backward;
the gradients are multiplied by inv_scale = float(1 / double(scale)); the step is skipped when
any is inf/nan; then the scale is multiplied by backoff_factor on such a step, or by
growth_factor after growth_interval good steps in a row. oar adds a floor (min_scale, default 1),
which this sequence never reaches. Infs and NaNs are planted into one gradient element after
backward on the steps listed in `plant`.

Format: "scaler key=value ..." (the options), "x|w|t <dims> | <values>" (f32, exact),
"plant <step> inf|nan", then per step "step <k> skipped <0|1> scale <s> tracker <n> | <w values>".
"""
import math
import os

import torch

OPTS = dict(init_scale=65536.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=3, lr=0.05, momentum=0.9)
STEPS = 14
PLANT = {2: "inf", 5: "nan", 6: "inf", 7: "inf", 11: "inf"}

x = torch.tensor([[math.sin(0.7 * i + 1.3 * j) for j in range(4)] for i in range(6)], dtype=torch.float32)
w = torch.tensor([[0.1 * math.cos(0.5 * i - 0.9 * j) for j in range(3)] for i in range(4)], dtype=torch.float32)
t = torch.tensor([[math.cos(0.3 * i * j + 0.2) for j in range(3)] for i in range(6)], dtype=torch.float32)

out = []
fmt = lambda v: repr(float(v))
def tensor_line(name, a):
    return "%s %s | %s" % (name, " ".join(str(d) for d in a.shape), " ".join(fmt(v) for v in a.flatten().tolist()))

out.append("scaler " + " ".join("%s=%r" % kv for kv in OPTS.items()))
out += [tensor_line("x", x), tensor_line("w", w), tensor_line("t", t)]
for k, v in sorted(PLANT.items()):
    out.append("plant %d %s" % (k, v))

p = w.clone().requires_grad_(True)
opt = torch.optim.SGD([p], lr=OPTS["lr"], momentum=OPTS["momentum"])
scale = torch.tensor(OPTS["init_scale"], dtype=torch.float32)
tracker = 0
for step in range(STEPS):
    opt.zero_grad()
    loss = ((x @ p - t) ** 2).mean()
    (loss * scale).backward()
    if step in PLANT:
        p.grad[0, 0] = float(PLANT[step])
    inv = scale.double().reciprocal().float()
    p.grad.mul_(inv)
    found = not bool(torch.isfinite(p.grad).all())
    if not found:
        opt.step()
    if found:
        scale = scale * OPTS["backoff_factor"]
        tracker = 0
    else:
        tracker += 1
        if tracker == OPTS["growth_interval"]:
            scale = scale * OPTS["growth_factor"]
            tracker = 0
    out.append("step %d skipped %d scale %s tracker %d | %s" % (step, int(found), fmt(scale), tracker,
                                                             " ".join(fmt(v) for v in p.detach().flatten().tolist())))

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "amp_scaler.txt")
with open(path, "w") as f:
    f.write("# made by tests/golden/gen_amp_scaler.py (torch %s); do not edit\n" % torch.__version__)
    f.write("\n".join(out) + "\n")
print("wrote", path)
