"""A detection-style model (detection_head.py: backbone -> torchvision.ops.roi_align over given
boxes -> classifier and box regression, then batched_nms and nms) runs from its unchanged PyTorch
code on oar: the same scores, refined boxes, kept detections and parameter gradients as torch
1.13 + torchvision 0.14 on the same weights."""
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

RTOL, ATOL = 1e-4, 1e-5


def test_detection_head_matches_torch(tmp_path):
    torch = pytest.importorskip("torch", reason="torch is absent (apt-get install python3-torch): no oracle")
    pytest.importorskip("torchvision", reason="torchvision is absent (apt-get install python3-torchvision)")
    if "oar" in (getattr(torch, "__file__", None) or "oar"):
        pytest.skip("torch resolves to oar in this interpreter (the switch is on): no oracle")
    sys.path.insert(0, os.path.dirname(__file__))
    import detection_head

    torch.manual_seed(3)
    model = detection_head.TinyDetector().eval()
    images = torch.randn(2, 3, 16, 20)
    rng = np.random.RandomState(5)
    boxes = []
    for n in (7, 5):  # proposals in image coordinates, some overlapping, some past the border
        xy = rng.uniform(-2, 14, (n, 2))
        boxes.append(torch.tensor(np.concatenate([xy, xy + rng.uniform(2, 9, (n, 2))], 1), dtype=torch.float32))
    scores, refined, keep, keep_all = detection_head.detect(model, images, boxes)
    gs, gb = torch.randn_like(scores), torch.randn_like(refined)
    ((scores * gs).sum() + (refined * gb).sum()).backward()
    req = {"state_dict": {k: v.detach().numpy().copy() for k, v in model.state_dict().items()},
           "images": images.numpy(), "boxes": [b.numpy() for b in boxes], "grad_scores": gs.numpy(),
           "grad_boxes": gb.numpy()}
    with open(tmp_path / "req.pkl", "wb") as f:
        pickle.dump(req, f)
    side = os.path.join(os.path.dirname(__file__), "detection_head_oar_side.py")
    env = dict(os.environ)
    env.pop("OAR_MOCK_TORCH", None)
    r = subprocess.run([sys.executable, side, str(tmp_path / "req.pkl"), str(tmp_path / "res.pkl")], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"oar side failed:\n{r.stdout}\n{r.stderr[-4000:]}"
    with open(tmp_path / "res.pkl", "rb") as f:
        got = pickle.load(f)
    np.testing.assert_allclose(got["scores"], scores.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg="scores")
    np.testing.assert_allclose(got["refined"], refined.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg="boxes")
    np.testing.assert_array_equal(got["keep"], keep.numpy(), err_msg="batched_nms")
    np.testing.assert_array_equal(got["keep_all"], keep_all.numpy(), err_msg="nms")
    assert len(keep) > 1 and len(keep_all) < len(refined)  # the case exercises suppression
    want = {k: p.grad.numpy() for k, p in model.named_parameters()}
    assert set(got["grads"]) == set(want), "parameters with gradients differ"
    for k, g in want.items():
        np.testing.assert_allclose(got["grads"][k], g, rtol=1e-3, atol=1e-4, err_msg=f"gradient of {k}")
