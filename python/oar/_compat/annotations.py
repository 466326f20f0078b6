"""torch.jit.annotations: TorchScript's type names, which annotate signatures in Python."""
from typing import List, Optional, Tuple  # noqa: F401

BroadcastingList1 = BroadcastingList2 = BroadcastingList3 = List
