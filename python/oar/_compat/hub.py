"""torch.hub / torch.utils.model_zoo: the cache folder and loading weights by URL."""
import os
import urllib.parse
import urllib.request

try:
    from tqdm import tqdm  # noqa: F401  (torch.hub re-exports it; datasets import it from here)
except ImportError:
    class tqdm:
        """The progress bar torch.hub falls back to without the tqdm package: counts, prints nothing."""

        def __init__(self, total=None, disable=False, unit=None, unit_scale=None, unit_divisor=None, **kwargs):
            self.total, self.n = total, 0

        def update(self, n):
            self.n += n

        def close(self):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.close()


def _get_torch_home():
    return os.path.expanduser(os.getenv("TORCH_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"),
                                                                   "torch")))


def get_dir():
    return os.path.join(_get_torch_home(), "hub")


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    """Downloads url to dst through a temporary file beside it, renamed into place only when whole
    (and, with hash_prefix, only when its SHA-256 starts with it), so dst is never half-written."""
    import hashlib

    part = dst + ".part"
    try:
        urllib.request.urlretrieve(url, part)
        if hash_prefix is not None:
            h = hashlib.sha256()
            with open(part, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            if not h.hexdigest().startswith(hash_prefix):
                raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got "{h.hexdigest()}") for {url}')
        os.replace(part, dst)
    finally:
        if os.path.exists(part):
            os.remove(part)


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True, check_hash=False,
                             file_name=None, weights_only=False):
    """Downloads (once, into the hub cache) and loads a safetensors file. PyTorch's pickled .pth
    files are refused with the remedy: oar reads safetensors, not pickles."""
    name = file_name or os.path.basename(urllib.parse.urlparse(url).path)
    if not name.endswith(".safetensors"):
        raise RuntimeError(f"load_state_dict_from_url: oar loads safetensors files, got '{name}' (a pickled "
                           "PyTorch checkpoint); convert it once with PyTorch (safetensors.torch.save_file("
                           "torch.load(path), 'weights.safetensors')) and load that with oar.load")
    folder = os.path.join(model_dir or get_dir(), "checkpoints")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        download_url_to_file(url, path)
    from ..serialization import load

    return load(path)


load_url = load_state_dict_from_url


def load(*args, **kwargs):
    raise RuntimeError("torch.hub.load: oar does not run hub repositories' entry points; import the model's "
                       "file under oar.mock_torch() and load its weights with oar.load")

