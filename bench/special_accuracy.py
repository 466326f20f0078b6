"""Accuracy of torch.special's Bessel, Airy, incomplete gamma, zeta and orthogonal polynomial functions
in oar and in torch 1.13, in float64, against mpmath at 40 digits (the polynomials against their
recurrences in exact rational arithmetic at the same doubles). Prints one JSON line per function:
the largest relative error of each library in units of 2^-53 (`ulp`), over the points where the
function is not near one of its zeros (|f| above 1e-3 of its local envelope; the oscillating
functions' zeros have no relative accuracy to measure), and the largest error relative to that
envelope everywhere (`env`), with the argument where each maximum occurs.

    PYTHONPATH=build/python python3 bench/special_accuracy.py [name ...]
"""
import json
import math
import sys
from fractions import Fraction

import mpmath as mp
import numpy as np
import torch

import oar

mp.mp.dps = 40
R = np.random.default_rng(7)
EPS = 2.0 ** -53


def signed_logspace(lo, hi, n, neg=True):
    x = np.logspace(lo, hi, n)
    return np.concatenate([-x[::-1], [0.0], x]) if neg else x


def grid(lo, hi, n):
    return np.concatenate([np.linspace(lo, hi, n), R.uniform(lo, hi, n)])


def envelope_osc(x):
    """the amplitude of J, Y ~ sqrt(2 / (pi x)), at most 1"""
    ax = np.abs(x)
    return np.minimum(1.0, np.sqrt(2.0 / (np.pi * np.maximum(ax, 1e-300))))


def measure(name, xs, exact, ours, theirs, env=None):
    exact = np.array([float(v) for v in exact], np.float64)
    fin = np.isfinite(exact) & (exact != 0)
    scale = np.abs(exact) if env is None else env
    out = {"name": name, "points": int(fin.sum())}
    for lib, got in (("oar", ours), ("torch", theirs)):
        got = np.asarray(got, np.float64)
        err = np.abs(got - exact)
        rel = np.where(fin, err / np.where(fin, np.abs(exact), 1.0), 0.0)
        far = fin & (np.abs(exact) >= 1e-3 * scale)
        envrel = np.where(fin, err / np.where(fin, np.maximum(scale, 1e-300), 1.0), 0.0)
        bad = fin & ~np.isfinite(got)
        r = np.where(far, rel, 0.0)
        k, m = int(np.argmax(r)), int(np.argmax(envrel))
        at = lambda i: [float(v[i]) for v in xs]
        out[lib] = {"ulp": float(r[k] / EPS), "at": at(k), "env": float(envrel[m] / EPS), "env_at": at(m),
                    "non_finite": int(bad.sum())}
    print(json.dumps(out), flush=True)


def unary(name, xs, f_mp, env=None):
    x = np.asarray(xs, np.float64)
    exact = [f_mp(mp.mpf(float(v))) for v in x]
    ours = getattr(oar.special, name)(oar.tensor(x)).numpy()
    theirs = getattr(torch.special, name)(torch.tensor(x)).numpy()
    measure(name, (x,), exact, ours, theirs, None if env is None else env(x))


def binary(name, a, b, f_mp, env=None):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    exact = [f_mp(float(u), float(v)) for u, v in zip(a, b)]
    ours = getattr(oar.special, name)(oar.tensor(a), oar.tensor(b)).numpy()
    theirs = getattr(torch.special, name)(torch.tensor(a), torch.tensor(b)).numpy()
    measure(name, (a, b), exact, ours, theirs, env)


def bessel():
    xi = signed_logspace(-8, math.log10(700), 300)
    unary("i0", xi, lambda v: mp.besseli(0, v))
    unary("i1", xi, lambda v: mp.besseli(1, v))
    xe = signed_logspace(-8, 5, 300)
    unary("i0e", xe, lambda v: mp.besseli(0, v) * mp.exp(-abs(v)))
    unary("i1e", xe, lambda v: mp.besseli(1, v) * mp.exp(-abs(v)))
    xk = np.concatenate([signed_logspace(-8, math.log10(700), 300, neg=False), grid(0.5, 40, 200)])
    unary("modified_bessel_k0", xk, lambda v: mp.besselk(0, v))
    unary("modified_bessel_k1", xk, lambda v: mp.besselk(1, v))
    xke = np.concatenate([signed_logspace(-8, 6, 300, neg=False), grid(0.5, 40, 200)])
    unary("scaled_modified_bessel_k0", xke, lambda v: mp.besselk(0, v) * mp.exp(v))
    unary("scaled_modified_bessel_k1", xke, lambda v: mp.besselk(1, v) * mp.exp(v))
    xj = np.concatenate([signed_logspace(-8, 4, 300), grid(-60, 60, 400)])
    unary("bessel_j0", xj, lambda v: mp.besselj(0, v), envelope_osc)
    unary("bessel_j1", xj, lambda v: mp.besselj(1, v), envelope_osc)
    xy = np.concatenate([signed_logspace(-8, 4, 300, neg=False), grid(0.01, 60, 400)])
    unary("bessel_y0", xy, lambda v: mp.bessely(0, v), envelope_osc)
    unary("bessel_y1", xy, lambda v: mp.bessely(1, v), envelope_osc)
    unary("spherical_bessel_j0", xj, lambda v: mp.sin(v) / v if v != 0 else mp.mpf(1),
          lambda x: np.minimum(1.0, 1.0 / np.maximum(np.abs(x), 1e-300)))
    xa = np.concatenate([grid(-200, 100, 600), signed_logspace(-6, 2, 100)])
    unary("airy_ai", xa, mp.airyai,
          lambda x: np.where(x < 0, np.minimum(0.6, 0.5642 * np.abs(np.minimum(x, -1e-300)) ** -0.25), np.inf))


def gamma_zeta():
    a = 10.0 ** R.uniform(-3, 4, 1500)
    x = a * 10.0 ** R.uniform(-1.5, 1.5, 1500)
    x[:300] = 10.0 ** R.uniform(-3, 2, 300)
    binary("gammainc", a, x, lambda u, v: mp.gammainc(u, 0, v, regularized=True))
    binary("gammaincc", a, x, upper_gamma)
    s, q = R.uniform(1.01, 40, 800), 10.0 ** R.uniform(-2, 2.5, 800)
    binary("zeta", s, q, zeta_hp)


def upper_gamma(u, v):
    try:
        return mp.gammainc(u, v, mp.inf, regularized=True)
    except (ValueError, mp.libmp.NoConvergence):  # mpmath's series gives up: 1 - P with 400 digits
        with mp.workdps(400):
            return 1 - mp.gammainc(u, 0, v, regularized=True)


def zeta_hp(u, v):
    """mpmath 1.2's Hurwitz zeta loses digits for large s and q (s = 39.8, q = 268.2: wrong in the 13th
    digit at 100 digits of working precision; a direct sum with its integral tail agrees with it at 300)"""
    with mp.workdps(300):
        return +mp.zeta(u, v)


def exact_poly(name, x, n):
    """p_n(x) at the double x, in exact rational arithmetic"""
    X = Fraction(x)
    if name.startswith("shifted_"):
        X = 2 * X - 1
        name = name[len("shifted_"):]
    kind = name.split("_")[-1]
    if n < 0:
        return Fraction(0)
    first = {"t": X, "u": 2 * X, "v": 2 * X - 1, "w": 2 * X + 1, "h": 2 * X, "he": X, "l": 1 - X, "p": X}[kind]
    p, q = Fraction(1), first
    if n == 0:
        return p
    for k in range(1, n):
        if kind in ("t", "u", "v", "w"):
            r = 2 * X * q - p
        elif kind == "h":
            r = 2 * X * q - 2 * k * p
        elif kind == "he":
            r = X * q - k * p
        elif kind == "l":
            r = ((2 * k + 1 - X) * q - k * p) / (k + 1)
        else:
            r = ((2 * k + 1) * X * q - k * p) / (k + 1)
        p, q = q, r
    return q


def polynomials():
    degrees = np.arange(-2, 51)
    for name, lo, hi in (("chebyshev_polynomial_t", -1.2, 1.2), ("chebyshev_polynomial_u", -1.2, 1.2),
                         ("chebyshev_polynomial_v", -1.2, 1.2), ("chebyshev_polynomial_w", -1.2, 1.2),
                         ("shifted_chebyshev_polynomial_t", -0.1, 1.1), ("shifted_chebyshev_polynomial_u", -0.1, 1.1),
                         ("shifted_chebyshev_polynomial_v", -0.1, 1.1), ("shifted_chebyshev_polynomial_w", -0.1, 1.1),
                         ("hermite_polynomial_h", -6, 6), ("hermite_polynomial_he", -8, 8),
                         ("laguerre_polynomial_l", 0, 60), ("legendre_polynomial_p", -1.2, 1.2)):
        xs = R.uniform(lo, hi, 40)
        a, b = np.repeat(xs, len(degrees)), np.tile(degrees.astype(np.float64), len(xs))
        exact = [exact_poly(name, float(u), int(v)) for u, v in zip(a, b)]
        # envelope: the largest |p_n| over this range's points, per degree
        env = np.zeros(len(a))
        ex = np.array([float(e) for e in exact])
        for d in degrees:
            m = b == d
            env[m] = max(np.abs(ex[m]).max(), 1e-300)
        binary(name, a, b, lambda u, v, _e=iter(exact): next(_e), env)


if __name__ == "__main__":
    groups = {"bessel": bessel, "gamma_zeta": gamma_zeta, "polynomials": polynomials}
    for g in sys.argv[1:] or groups:
        groups[g]()
