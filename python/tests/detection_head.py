"""A small two-stage detection head written as plain PyTorch code (torch and torchvision.ops only):
backbone features -> roi_align over given boxes -> a classifier, then batched_nms and nms on the
scores. test_detection_head.py runs this file with torch 1.13 + torchvision 0.14 and, unchanged,
on oar under the torch switch (detection_head_oar_side.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision.ops import batched_nms, nms, roi_align

NUM_CLASSES = 4


class TinyDetector(nn.Module):
    def __init__(self, num_classes=NUM_CLASSES):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(16 * 4 * 4, 32), nn.ReLU())
        self.cls = nn.Linear(32, num_classes + 1)  # class 0: background
        self.box = nn.Linear(32, 4)

    def forward(self, images, boxes):
        """images [N, 3, H, W]; boxes: one [L, 4] tensor of (x1, y1, x2, y2) per image."""
        feats = self.backbone(images)  # stride 2
        pooled = roi_align(feats, boxes, output_size=4, spatial_scale=0.5, sampling_ratio=2, aligned=True)
        h = self.head(pooled)
        return F.softmax(self.cls(h), dim=-1), self.box(h)


def detect(model, images, boxes, iou=0.5):
    """Scores and refined boxes of the proposals, and the detections kept per (image, class) and
    over all proposals."""
    scores, deltas = model(images, boxes)
    proposals = torch.cat(boxes, 0)
    refined = proposals + deltas
    image_of = torch.cat([torch.full((len(b),), i, dtype=torch.int64) for i, b in enumerate(boxes)])
    best, label = scores[:, 1:].max(dim=1)
    keep = batched_nms(refined, best, image_of * NUM_CLASSES + label, iou)
    keep_all = nms(refined, best, 0.3)
    return scores, refined, keep, keep_all
