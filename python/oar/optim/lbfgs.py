"""L-BFGS (Nocedal & Wright, Numerical Optimization, 2nd ed.: Algorithm 7.4, the two-loop
recursion, in Algorithm 7.5's outer loop; line search by Algorithms 3.5 and 3.6 with cubic
interpolation, eq. 3.59), over every parameter flattened into one vector, with torch 1.13's
options, stopping rules and state. Python on tensor ops, as torch's is."""
import math

from .. import _C
from .._grad_mode import enable_grad, no_grad


def _cubic_min(a, fa, ga, b, fb, gb, lo=None, hi=None):
    """The minimizer in [lo, hi] (default: between a and b) of the cubic matching f and f' at a and
    b (N&W eq. 3.59); the interval's middle when the cubic has no minimizer."""
    if lo is None:
        lo, hi = min(a, b), max(a, b)
    d1 = ga + gb - 3 * (fa - fb) / (a - b)
    disc = d1 * d1 - ga * gb
    if disc < 0:
        return (lo + hi) / 2
    d2 = math.sqrt(disc)
    if a <= b:
        x = b - (b - a) * ((gb + d2 - d1) / (gb - ga + 2 * d2))
    else:
        x = a - (a - b) * ((ga + d2 - d1) / (ga - gb + 2 * d2))
    return min(max(x, lo), hi)


def _strong_wolfe(evaluate, f0, g0, gtd0, t, d, c1=1e-4, c2=0.9, tol=1e-9, max_ls=25):
    """A step length t along d satisfying the strong Wolfe conditions (N&W Algorithm 3.5: extend
    the step until a bracket is found, then Algorithm 3.6: shrink it by interpolation). evaluate(t)
    returns (f, g) at x + t d. Returns f, g, t and the number of evaluations."""
    d_scale = float(d.abs().max())
    f, g = evaluate(t)
    evals = 1
    gtd = float(g.dot(d))
    # (t, f, g, g.d) of the previous trial; the start point first
    prev = (0.0, f0, g0, gtd0)
    bracket = None
    done = False
    it = 0
    while it < max_ls:
        if f > f0 + c1 * t * gtd0 or (it > 1 and f >= prev[1]):  # too long: a minimum lies before t
            bracket = [prev, (t, f, g, gtd)]
            break
        if abs(gtd) <= -c2 * gtd0:  # both conditions hold
            bracket, done = [(t, f, g, gtd)], True
            break
        if gtd >= 0:  # the slope turned: a minimum lies before t
            bracket = [prev, (t, f, g, gtd)]
            break
        # extrapolate: a longer step, between 1.01 t and 10 t (minus the previous one)
        t_next = _cubic_min(prev[0], prev[1], prev[3], t, f, gtd, t + 0.01 * (t - prev[0]), 10 * t)
        prev = (t, f, g, gtd)
        t = t_next
        f, g = evaluate(t)
        evals += 1
        gtd = float(g.dot(d))
        it += 1
    if it == max_ls:
        bracket = [(0.0, f0, g0, gtd0), (t, f, g, gtd)]
    if done:
        return f, g, t, evals
    lo, hi = (0, 1) if bracket[0][1] <= bracket[1][1] else (1, 0)
    stuck = False
    while not done and it < max_ls:
        a, b = bracket[0][0], bracket[1][0]
        if abs(b - a) * d_scale < tol:
            break
        t = _cubic_min(a, bracket[0][1], bracket[0][3], b, bracket[1][1], bracket[1][3])
        # keep the trial away from the ends: a point too close gives little information
        left, right = min(a, b), max(a, b)
        margin = 0.1 * (right - left)
        if min(right - t, t - left) < margin:
            if stuck or t >= right or t <= left:
                t = right - margin if abs(t - right) < abs(t - left) else left + margin
                stuck = False
            else:
                stuck = True
        else:
            stuck = False
        f, g = evaluate(t)
        evals += 1
        gtd = float(g.dot(d))
        it += 1
        if f > f0 + c1 * t * gtd0 or f >= bracket[lo][1]:
            bracket[hi] = (t, f, g, gtd)  # a worse point: it becomes the far end
        else:
            if abs(gtd) <= -c2 * gtd0:
                done = True
            elif gtd * (bracket[hi][0] - bracket[lo][0]) >= 0:
                bracket[hi] = bracket[lo]  # the slope points back: the old best is the far end
            bracket[lo] = (t, f, g, gtd)
        lo, hi = (0, 1) if bracket[0][1] <= bracket[1][1] else (1, 0)
    t, f, g, _ = bracket[lo]
    return f, g, t, evals


class LBFGS:
    """torch.optim.LBFGS: one parameter group; step(closure) runs up to max_iter iterations, the
    closure re-evaluating the loss and its gradients."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if isinstance(params, _C.TensorBase):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, but "
                            f"got {type(params).__name__}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if line_search_fn not in (None, "strong_wolfe"):
            raise RuntimeError(f"only 'strong_wolfe' is supported, got line_search_fn={line_search_fn!r}")
        self.defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                             tolerance_change=tolerance_change, history_size=history_size,
                             line_search_fn=line_search_fn)
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        if len(groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        g = dict(groups[0])
        g["params"] = list(g["params"])
        for k, v in self.defaults.items():
            g.setdefault(k, v)
        self.param_groups = [g]
        self._params = g["params"]
        self.state = {}

    # ---- the parameters as one flat vector
    def _flat_grad(self):
        parts = [p.grad.reshape(-1) if p.grad is not None else _C_zeros(p) for p in self._params]
        return _cat(parts)

    def _add(self, t, d):
        """parameters += t * d"""
        at = 0
        with no_grad():
            for p in self._params:
                n = p.numel()
                p.add_(d[at:at + n].reshape(p.shape), alpha=t)
                at += n

    def _values(self):
        return [p.detach().clone() for p in self._params]

    def _restore(self, values):
        with no_grad():
            for p, v in zip(self._params, values):
                p.copy_(v)

    def zero_grad(self, set_to_none=True):
        for p in self._params:
            p.grad = None

    def step(self, closure):
        if closure is None:
            raise RuntimeError("LBFGS.step needs a closure that re-evaluates the model and returns the loss")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history, line_search = group["history_size"], group["line_search_fn"]
        st = self.state.setdefault("global", {"func_evals": 0, "n_iter": 0})

        with enable_grad():
            first_loss = closure()
        loss = float(first_loss)
        evals = 1
        st["func_evals"] += 1
        g = self._flat_grad()
        if float(g.abs().max()) <= tol_grad:  # already stationary
            return first_loss

        d, t = st.get("d"), st.get("t")
        dirs, steps, rhos = st.get("old_dirs", []), st.get("old_stps", []), st.get("ro", [])
        h0 = st.get("H_diag", 1.0)
        g_prev, loss_prev = st.get("prev_flat_grad"), st.get("prev_loss")
        it = 0
        while it < max_iter:
            it += 1
            st["n_iter"] += 1
            if st["n_iter"] == 1:
                d = g.neg()
                dirs, steps, rhos, h0 = [], [], [], 1.0
            else:
                # the newest pair (s, y); kept only under the curvature condition y.s > 0
                y = g.sub(g_prev)
                s = d.mul(t)
                ys = float(y.dot(s))
                if ys > 1e-10:
                    if len(dirs) == history:
                        dirs.pop(0), steps.pop(0), rhos.pop(0)
                    dirs.append(y)
                    steps.append(s)
                    rhos.append(1.0 / ys)
                    h0 = ys / float(y.dot(y))  # N&W eq. 7.20: the initial inverse Hessian's scale
                # two-loop recursion (N&W Algorithm 7.4): d = -H g
                q = g.neg()
                alphas = [0.0] * len(dirs)
                for i in range(len(dirs) - 1, -1, -1):
                    alphas[i] = float(steps[i].dot(q)) * rhos[i]
                    q.add_(dirs[i], alpha=-alphas[i])
                r = q.mul(h0)
                for i in range(len(dirs)):
                    beta = float(dirs[i].dot(r)) * rhos[i]
                    r.add_(steps[i], alpha=alphas[i] - beta)
                d = r
            g_prev, loss_prev = g.clone(), loss
            # the first step is scaled by the gradient's size, as the Hessian is not known yet
            t = min(1.0, 1.0 / float(g.abs().sum())) * lr if st["n_iter"] == 1 else lr
            gtd = float(g.dot(d))
            if gtd > -tol_change:  # not a descent direction
                break
            ls_evals = 0
            if line_search == "strong_wolfe":
                x0 = self._values()

                def evaluate(step):
                    self._add(step, d)
                    with enable_grad():
                        f = float(closure())
                    grad = self._flat_grad()
                    self._restore(x0)
                    return f, grad

                loss, g, t, ls_evals = _strong_wolfe(evaluate, loss, g, gtd, t, d, tol=tol_change)
                self._add(t, d)
                stationary = float(g.abs().max()) <= tol_grad
            else:
                self._add(t, d)
                stationary = False
                if it != max_iter:  # re-evaluate, except after the last iteration
                    with enable_grad():
                        loss = float(closure())
                    g = self._flat_grad()
                    stationary = float(g.abs().max()) <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            st["func_evals"] += ls_evals
            if it == max_iter or evals >= max_eval or stationary:
                break
            if float(d.mul(t).abs().max()) <= tol_change or abs(loss - loss_prev) < tol_change:
                break  # no progress
        st.update(d=d, t=t, old_dirs=dirs, old_stps=steps, ro=rhos, H_diag=h0, prev_flat_grad=g_prev,
                  prev_loss=loss_prev)
        return first_loss

    def state_dict(self):
        groups = [{k: v for k, v in g.items() if k != "params"} for g in self.param_groups]
        groups[0]["params"] = list(range(len(self._params)))
        st = dict(self.state.get("global", {}))
        return {"state": {0: st} if st else {}, "param_groups": groups}

    def load_state_dict(self, state_dict):
        self.param_groups[0].update({k: v for k, v in state_dict["param_groups"][0].items() if k != "params"})
        self.state = {"global": dict(state_dict["state"][0])} if state_dict["state"] else {}

    def __repr__(self):
        g = self.param_groups[0]
        return "LBFGS (\nParameter Group 0" + "".join(f"\n    {k}: {g[k]}" for k in sorted(g) if k != "params") + "\n)"


def _C_zeros(p):
    from .. import zeros

    return zeros(p.numel(), dtype=p.dtype)


def _cat(parts):
    from .. import cat

    return cat(parts)
