"""The oar half of test_detection_head.py, in its own interpreter so that `import torch` in
detection_head.py (and in torchvision.ops) resolves to oar.

    python detection_head_oar_side.py REQUEST.pkl RESULT.pkl

REQUEST: {state_dict, images, boxes (a list of arrays), grad_scores, grad_boxes} (numpy).
RESULT: scores, refined boxes, the kept indices, and every parameter's gradient."""
import os
import pickle
import sys
import warnings

import numpy as np

import oar

oar.mock_torch()
warnings.filterwarnings("ignore", message="Failed to load image Python extension")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402  (oar, through the switch)
import detection_head  # noqa: E402

with open(sys.argv[1], "rb") as f:
    req = pickle.load(f)
model = detection_head.TinyDetector()
model.load_state_dict({k: torch.from_numpy(np.array(v, order="C")) for k, v in req["state_dict"].items()})
model.eval()
boxes = [torch.from_numpy(b) for b in req["boxes"]]
scores, refined, keep, keep_all = detection_head.detect(model, torch.from_numpy(req["images"]), boxes)
((scores * torch.from_numpy(req["grad_scores"])).sum() + (refined * torch.from_numpy(req["grad_boxes"])).sum()).backward()
res = {"scores": scores.detach().numpy().copy(), "refined": refined.detach().numpy().copy(),
       "keep": keep.numpy().copy(), "keep_all": keep_all.numpy().copy(),
       "grads": {k: p.grad.numpy().copy() for k, p in model.named_parameters() if p.grad is not None}}
with open(sys.argv[2], "wb") as f:
    pickle.dump(res, f)
