"""What the 2-rank Python scripts share: the error check, and a saved run read back."""
import json

import numpy as np


def expect(kind, words, fn):
    """fn() must raise kind with every word of words in its message."""
    try:
        fn()
    except kind as e:
        missing = [w for w in words if w not in str(e)]
        assert not missing, f"{kind.__name__} without {missing}: {e}"
        return str(e)
    except Exception as e:  # noqa: BLE001 (the wrong kind is the failure reported)
        raise AssertionError(f"expected {kind.__name__}, got {type(e).__name__}: {e}") from e
    raise AssertionError(f"expected {kind.__name__} ({words}), nothing was raised")


def load(path, rank):
    """A run's rank: OUT.rank.npz, or the golden values recorded from PyTorch (.json of `golden`)."""
    if not path.endswith(".json"):
        z = np.load(f"{path}.{rank}.npz")
        return {k: z[k] for k in z.files}
    with open(path) as f:
        g = json.load(f)
    out = {"losses": np.array(g["losses"][rank], dtype=np.float64), "extra": np.array(g["extra"][rank])}
    out.update({f"p{k}": np.array(v, dtype=np.float32) for k, v in enumerate(g["params"])})
    return out
