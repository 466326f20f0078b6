"""nn.AdaptiveLogSoftmaxWithLoss (Grave et al., "Efficient softmax approximation for GPUs", 2017):
the frequent classes (below cutoffs[0]) and one entry per rarer cluster share a head softmax; a
cluster's classes get their own smaller softmax (a projection to in_features / div_value^(i+1),
then the cluster's classes), evaluated only for the rows whose target is in that cluster."""
import collections

from ... import _creation as C
from ... import _dtype as D
from ... import _functions as F
from .. import functional as NF
from .layers import Linear, ModuleList, Sequential
from .module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = collections.namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing "
                             "order, where each value is between 1 and n_classes-1")
        self.in_features, self.n_classes, self.div_value, self.head_bias = in_features, n_classes, div_value, head_bias
        self.cutoffs = cutoffs + [n_classes]
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, dtype=dtype),
                                        Linear(hidden, size, bias=False, dtype=dtype)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for projection, classes in self.tail:
            projection.reset_parameters()
            classes.reset_parameters()

    def forward(self, input, target):
        """(output, loss): output[b] the log-probability of target[b], loss the mean of -output."""
        batched = input.dim() == 2
        if input.dim() not in (1, 2) or target.dim() != input.dim() - 1:
            raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: expected a 2D input with a 1D target or a 1D input "
                               f"with a 0D target, got input {list(input.shape)} and target {list(target.shape)}")
        if batched and input.shape[0] != target.shape[0]:
            raise RuntimeError("Input and target should have the same size in the batch dimension.")
        x = input if batched else input.unsqueeze(0)
        t = (target if batched else target.unsqueeze(0)).to(D.int64)
        if t.numel() and (t.min().item() < 0 or t.max().item() >= self.n_classes):
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                               f"[{t.min().item()}, {t.max().item()}] were found. ")
        head = NF.log_softmax(self.head(x), dim=1)
        in_short = t < self.shortlist_size
        # the head's log-probability of each row's class (shortlist) or cluster entry (rare classes)
        clusters_passed = C.zeros_like(t)   # 1 + the cluster of a rare class
        for i in range(self.n_clusters):
            clusters_passed = clusters_passed + (t >= self.cutoffs[i]).to(D.int64)
        head_col = F.where(in_short, t, self.shortlist_size + clusters_passed - 1)
        output = head.gather(1, head_col.unsqueeze(1)).squeeze(1)
        for i in range(self.n_clusters):
            lo, hi = self.cutoffs[i], self.cutoffs[i + 1]
            rows = ((t >= lo) & (t < hi)).nonzero().flatten()
            if rows.numel() == 0:
                continue
            tail = NF.log_softmax(self.tail[i](x.index_select(0, rows)), dim=1)
            picked = tail.gather(1, (t.index_select(0, rows) - lo).unsqueeze(1)).squeeze(1)
            output = output.index_add(0, rows, picked)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _full_log_prob(self, x, head):
        parts = [head[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            parts.append(NF.log_softmax(self.tail[i](x), dim=1) + head[:, self.shortlist_size + i:self.shortlist_size + i + 1])
        return F.cat(parts, 1)

    def log_prob(self, input):
        """Log-probabilities of every class, [batch, n_classes] (or [n_classes] for one input)."""
        x = input if input.dim() == 2 else input.unsqueeze(0)
        out = self._full_log_prob(x, NF.log_softmax(self.head(x), dim=1))
        return out if input.dim() == 2 else out.squeeze(0)

    def predict(self, input):
        """The most probable class of each row."""
        return self.log_prob(input).argmax(dim=-1)
