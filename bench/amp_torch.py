#!/usr/bin/python3
"""PyTorch's CPU autocast (bf16) on the shared anchor workloads, to time beside `oar bench --amp O1`
(bench/amp_compare.sh runs both): ../shared/bench/torch_workloads.py with its training steps
inside torch.autocast("cpu", dtype=torch.bfloat16) when --amp is given, plain f32 otherwise.

Usage: /usr/bin/python3 bench/amp_torch.py --workload resnet20 --threads 2 [--steps N] [--amp]
"""
import os
import runpy
import sys

amp = "--amp" in sys.argv
argv = [a for a in sys.argv[1:] if a != "--amp"]
threads = argv[argv.index("--threads") + 1] if "--threads" in argv else "1"
# as torch_workloads.py does, before torch loads its thread pools
os.environ["OMP_NUM_THREADS"] = threads
os.environ["OPENBLAS_NUM_THREADS"] = threads

import torch  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
shared = os.environ.get("OAR_SHARED_DIR", os.path.join(here, "..", "..", "shared"))
script = os.path.join(shared, "bench", "torch_workloads.py")
if not os.path.exists(script):
    sys.exit("amp_torch: %s not found (set OAR_SHARED_DIR)" % script)
sys.argv = [script] + argv
if amp:  # the whole run under autocast: forward ops cast, as in a user's `with torch.autocast(...)`
    torch.autocast("cpu", dtype=torch.bfloat16).__enter__()
runpy.run_path(script, run_name="__main__")
