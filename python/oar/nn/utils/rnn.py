"""torch.nn.utils.rnn: sequences of different lengths in one batch.

A PackedSequence holds the steps of every sequence, time-major, the sequences sorted by decreasing
length: step t contributes batch_sizes[t] rows (the sequences longer than t). The recurrent
layers run a packed input step by step on the active prefix of the batch, so each sequence stops at
its own length and its final state is that of its last step (modules/rnn.py)."""
from collections import namedtuple

from ... import _creation as C
from ... import _dtype as D
from ... import _functions as F


class PackedSequence(namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = F.argsort(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        move = lambda t: None if t is None else t.to(data.device)
        return type(self)(data, self.batch_sizes, move(self.sorted_indices), move(self.unsorted_indices))

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def is_pinned(self):
        return False


def _lengths(lengths):
    if isinstance(lengths, (list, tuple)):
        return [int(n) for n in lengths]
    return [int(n) for n in lengths.detach().cpu().tolist()]


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """input [T, B, *] (or [B, T, *]) with each sequence's length: a PackedSequence."""
    lengths = _lengths(lengths)
    if enforce_sorted:
        if any(a < b for a, b in zip(lengths, lengths[1:])):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                               "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
                               "to sidestep this requirement if you do not need ONNX exportability.")
        order = None
    else:
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])  # stable, as torch's sort here
        lengths = [lengths[i] for i in order]
    if lengths and lengths[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    x = input.transpose(0, 1) if batch_first else input
    if len(lengths) != x.shape[1]:
        raise ValueError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(lengths)} (batch_size="
                         f"{x.shape[1]})")
    if lengths[0] > x.shape[0]:
        raise RuntimeError(f"pack_padded_sequence: a length of {lengths[0]} exceeds the {x.shape[0]} steps of the input")
    sorted_indices = None
    if order is not None:
        sorted_indices = C.tensor(order, dtype=D.int64, device=input.device)
        x = F.index_select(x, 1, sorted_indices)
    batch_sizes = [sum(1 for n in lengths if n > t) for t in range(lengths[0] if lengths else 0)]
    data = F.cat([x[t, :b] for t, b in enumerate(batch_sizes)], 0)
    return PackedSequence(data, C.tensor(batch_sizes, dtype=D.int64), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The inverse: (padded [T, B, *] (or [B, T, *]) in the original batch order, lengths)."""
    data, batch_sizes = sequence.data, [int(b) for b in sequence.batch_sizes.tolist()]
    steps, n = len(batch_sizes), batch_sizes[0] if batch_sizes else 0
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"Expected total_length to be at least the length of the longest sequence in input, but "
                             f"got total_length={total_length} and max sequence length being {steps}")
        steps_out = total_length
    else:
        steps_out = steps
    feat = tuple(data.shape[1:])
    rows, off = [], 0
    for b in batch_sizes:
        step = data[off:off + b]
        off += b
        if b < n:
            step = F.cat([step, C.full((n - b, *feat), padding_value, dtype=data.dtype, device=data.device)], 0)
        rows.append(step)
    rows += [C.full((n, *feat), padding_value, dtype=data.dtype, device=data.device)] * (steps_out - steps)
    padded = F.stack(rows, 0)
    lengths = [sum(1 for b in batch_sizes if b > i) for i in range(n)]
    lengths = C.tensor(lengths, dtype=D.int64)
    if sequence.unsorted_indices is not None:
        padded = F.index_select(padded, 1, sequence.unsorted_indices)
        lengths = F.index_select(lengths, 0, sequence.unsorted_indices.cpu())
    return (padded.transpose(0, 1) if batch_first else padded), lengths


def pad_sequence(sequences, batch_first=False, padding_value=0.0):
    """A list of [L_i, *] tensors as one [max L, B, *] (or [B, max L, *]) tensor, padded."""
    sequences = list(sequences)
    longest = max(s.shape[0] for s in sequences)
    cols = []
    for s in sequences:
        if s.shape[0] < longest:
            pad = C.full((longest - s.shape[0], *s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
            s = F.cat([s, pad], 0)
        cols.append(s)
    return F.stack(cols, 0 if batch_first else 1)


def pack_sequence(sequences, enforce_sorted=True):
    sequences = list(sequences)
    return pack_padded_sequence(pad_sequence(sequences), [s.shape[0] for s in sequences],
                                enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[i, :n] for i, n in enumerate(_lengths(lengths))]


def unpack_sequence(packed_sequences):
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
