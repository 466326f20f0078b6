"""Plain PyTorch programs that oar runs unchanged (see zoo_torch.py)."""
