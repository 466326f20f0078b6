"""torch functions oar writes as compositions (python/oar/_compositions.py), and the elementwise math
functions added with them as ops of the table (asin ... atan2, expm1, exp2, erfc), table-driven beside
torch 1.13: each case runs the same call on both libraries from the same arrays; values must agree,
and for float outputs of differentiable cases, the gradient of sum(out * g) for every float input."""
import math

import numpy as np
import pytest

import oar

R = np.random.default_rng(31)


def f32(*shape):
    return R.standard_normal(shape).astype(np.float32)


def pos(*shape):
    return (R.random(shape) + 0.1).astype(np.float32)


def ints(hi, *shape):
    return R.integers(0, hi, shape).astype(np.int64)


SPECIAL = np.array([0.0, -0.0, 1.5, -2.0, np.nan, np.inf, -np.inf, 3.0], np.float32)
SORTED = np.sort(f32(7))
# the gamma family between its poles, negatives included (reflection), and at the poles themselves
NEG_GAMMA = np.array([[-2.5, -0.5, 0.3, 4.2], [7.5, 12.25, -3.75, 1.5], [0.01, 25.0, -1.2, 2.0]], np.float32)
POLES = np.array([0.0, -0.0, -1.0, -2.0, 1.0, 2.0, np.inf, -np.inf, np.nan], np.float32)
INTS_A = np.array([[12, -12, 0, 7, -100], [255, -1, 33, 64, -64]], np.int64)
INTS_B = np.array([[18, 18, -5, 0, 75], [-3, 9, 11, 48, 40]], np.int64)
BOOLS = np.array([True, False, True, False])
ZEROS_LINES = np.array([[1.5, 0.0, 2.0, -0.5, 1.25], [0.0, 3.0, 0.7, 1.2, -2.0], [0.5, 0.0, 2.0, 0.0, 1.5],
                        [1.1, -0.9, 1.3, 0.8, 2.0]], np.float32)
TIES_NAN = np.array([[1.0, 3.0, 3.0, 2.0, np.nan, 5.0, np.nan, 1.0], [2.0, 1.0, 1.0, 4.0, 4.0, 0.5, 6.0, 6.0]],
                    np.float32)
MODE_ROWS = np.array([[3.0, 1.0, 3.0, 1.0, 2.0], [5.0, 5.0, 4.0, 4.0, 4.0], [0.5, -1.0, 2.0, 0.25, 7.0]], np.float32)
SR_SELF = np.array([[1.5, -2.0, 3.0, 0.5], [2.0, 0.0, -1.0, 4.0]], np.float32)
SR_SRC = np.array([[3.0, 0.5, 3.0, -1.0, 0.0], [2.0, 5.0, -2.0, 0.0, 2.0]], np.float32)  # ties with each other and self
SR_INDEX = np.array([[0, 2, 0, 2, 0], [0, 1, 1, 1, 3]], np.int64)  # slot 1 of row 0 and slot 2 of row 1 unreached
MASK34 = np.array([[True, False, True, True], [False, False, True, False], [True, True, False, True]])
SPD = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], np.float32)
NAN_ROWS = np.array([[1.0, np.nan, 3.0, 2.0, -1.0], [np.nan, 0.5, np.nan, 4.0, 2.5], [np.nan] * 5], np.float32)

# name -> (inputs, call(lib, *tensors), differentiable)
CASES = {
    "isnan": ([SPECIAL], lambda L, x: L.isnan(x), False),
    "isinf": ([SPECIAL], lambda L, x: L.isinf(x), False),
    "isposinf": ([SPECIAL], lambda L, x: L.isposinf(x), False),
    "isneginf": ([SPECIAL], lambda L, x: L.isneginf(x), False),
    "isfinite": ([SPECIAL], lambda L, x: L.isfinite(x), False),
    "isfinite_int": ([ints(5, 4)], lambda L, x: L.isfinite(x), False),
    "signbit": ([SPECIAL], lambda L, x: L.signbit(x), False),
    "nan_to_num": ([SPECIAL], lambda L, x: L.nan_to_num(x), False),
    "nan_to_num_values": ([SPECIAL], lambda L, x: L.nan_to_num(x, nan=1.0, posinf=9.0, neginf=-9.0), False),
    "nansum": ([SPECIAL.reshape(2, 4)], lambda L, x: L.nansum(L.nan_to_num(x, posinf=1.0, neginf=2.0) * 0 + x, 1),
               False),
    "nanmean": ([np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, 2.0]], np.float32)],
                lambda L, x: L.nanmean(x, 1), False),
    "reciprocal": ([pos(3, 4)], lambda L, x: L.reciprocal(x), True),
    "tan": ([f32(3, 4) * 0.5], lambda L, x: L.tan(x), True),
    "cosh": ([f32(3, 4)], lambda L, x: L.cosh(x), True),
    "deg2rad": ([f32(5) * 90], lambda L, x: L.deg2rad(x), True),
    "rad2deg": ([f32(5)], lambda L, x: L.rad2deg(x), True),
    "frac": ([f32(6) * 4], lambda L, x: L.frac(x), True),
    "hypot": ([f32(3, 4), f32(4)], lambda L, x, y: L.hypot(x, y), True),
    "logaddexp": ([f32(3, 4) * 30, f32(3, 4) * 30], lambda L, x, y: L.logaddexp(x, y), True),
    "logaddexp_inf": ([np.array([np.inf, -np.inf, 1.0], np.float32), np.array([np.inf, -np.inf, -np.inf], np.float32)],
                      lambda L, x, y: L.logaddexp(x, y), False),
    "logaddexp2": ([f32(3, 4) * 5, f32(3, 4) * 5], lambda L, x, y: L.logaddexp2(x, y), True),
    "logit": ([pos(3, 4) * 0.8], lambda L, x: L.logit(x), True),
    "logit_eps": ([np.array([0.0, 0.5, 1.0], np.float32)], lambda L, x: L.logit(x, eps=1e-3), False),
    "xlogy": ([np.array([0.0, 1.0, 2.0, 0.0], np.float32), np.array([0.0, 3.0, 0.5, np.nan], np.float32)],
              lambda L, x, y: L.xlogy(x, y), False),
    "sinc": ([np.array([0.0, 0.5, -1.25, 2.0], np.float32)], lambda L, x: L.sinc(x), True),
    "heaviside": ([np.array([-1.0, 0.0, 2.0], np.float32), np.array([0.5], np.float32)],
                  lambda L, x, v: L.heaviside(x, v), False),
    "float_power": ([pos(4), f32(4)], lambda L, x, y: L.float_power(x, y), True),
    "fmax": ([np.array([1.0, np.nan, np.nan, -2.0], np.float32), np.array([np.nan, 2.0, np.nan, 3.0], np.float32)],
             lambda L, x, y: L.fmax(x, y), False),
    "fmin": ([np.array([1.0, np.nan, np.nan, -2.0], np.float32), np.array([np.nan, 2.0, np.nan, 3.0], np.float32)],
             lambda L, x, y: L.fmin(x, y), False),
    "logical_xor": ([ints(2, 6), ints(2, 6)], lambda L, x, y: L.logical_xor(x, y), False),
    "lerp": ([f32(3, 4), f32(3, 4), pos(3, 4)], lambda L, a, b, w: L.lerp(a, b, w), True),
    "lerp_scalar": ([f32(3, 4), f32(3, 4)], lambda L, a, b: L.lerp(a, b, 0.75), True),
    "addcmul": ([f32(3, 4), f32(3, 4), f32(4)], lambda L, a, b, c: L.addcmul(a, b, c, value=0.5), True),
    "addcdiv": ([f32(3, 4), f32(3, 4), pos(4)], lambda L, a, b, c: L.addcdiv(a, b, c, value=-2), True),
    "addmv": ([f32(3), f32(3, 5), f32(5)], lambda L, a, m, v: L.addmv(a, m, v, beta=0.5, alpha=2), True),
    "baddbmm": ([f32(2, 3, 4), f32(2, 3, 5), f32(2, 5, 4)], lambda L, a, b, c: L.baddbmm(a, b, c, alpha=0.5), True),
    "mv": ([f32(3, 5), f32(5)], lambda L, m, v: L.mv(m, v), True),
    "vdot": ([f32(6), f32(6)], lambda L, a, b: L.vdot(a, b), True),
    "inner": ([f32(2, 3, 4), f32(5, 4)], lambda L, a, b: L.inner(a, b), True),
    "tensordot": ([f32(2, 3, 4), f32(4, 3, 5)], lambda L, a, b: L.tensordot(a, b, ([1, 2], [1, 0])), True),
    "tensordot_int": ([f32(2, 3, 4), f32(3, 4, 5)], lambda L, a, b: L.tensordot(a, b, 2), True),
    "kron": ([f32(2, 3), f32(4, 2)], lambda L, a, b: L.kron(a, b), True),
    "kron_3d": ([f32(2, 1, 3), f32(2, 2)], lambda L, a, b: L.kron(a, b), True),
    "broadcast_tensors": ([f32(3, 1), f32(4)], lambda L, a, b: L.stack(L.broadcast_tensors(a, b)), True),
    "hstack": ([f32(2, 3), f32(2, 1)], lambda L, a, b: L.hstack([a, b]), True),
    "vstack": ([f32(3), f32(2, 3)], lambda L, a, b: L.vstack([a, b]), True),
    "dstack": ([f32(2, 3), f32(2, 3, 2)], lambda L, a, b: L.dstack([a, b]), True),
    "column_stack": ([f32(3), f32(3, 2)], lambda L, a, b: L.column_stack([a, b]), True),
    "hsplit": ([f32(2, 6)], lambda L, a: L.stack(L.hsplit(a, 3)), True),
    "vsplit": ([f32(4, 3)], lambda L, a: L.cat(L.vsplit(a, [1, 3])), True),
    "movedim": ([f32(2, 3, 4, 5)], lambda L, a: L.movedim(a, (0, 3), (2, 0)), True),
    "ravel": ([f32(2, 3)], lambda L, a: L.ravel(a.t()), True),
    "fliplr": ([f32(3, 4)], lambda L, a: L.fliplr(a), True),
    "flipud": ([f32(3, 4)], lambda L, a: L.flipud(a), True),
    "rot90_1": ([f32(3, 4, 2)], lambda L, a: L.rot90(a, 1, [0, 1]), True),
    "rot90_2": ([f32(3, 4)], lambda L, a: L.rot90(a, 2), True),
    "rot90_3": ([f32(3, 4, 2)], lambda L, a: L.rot90(a, -1, [1, 2]), True),
    "tile": ([f32(2, 3)], lambda L, a: L.tile(a, (2, 1, 2)), True),
    "diagonal": ([f32(2, 4, 5)], lambda L, a: L.diagonal(a, 1, 1, 2), True),
    "diagonal_neg": ([f32(4, 5)], lambda L, a: L.diagonal(a, -2), True),
    "diag_vec": ([f32(4)], lambda L, a: L.diag(a, 1), True),
    "diag_mat": ([f32(4, 3)], lambda L, a: L.diag(a, -1), True),
    "diag_embed": ([f32(2, 3)], lambda L, a: L.diag_embed(a, -1), True),
    "diagflat": ([f32(2, 2)], lambda L, a: L.diagflat(a), True),
    "trace": ([f32(4, 4)], lambda L, a: L.trace(a), True),
    "tril_indices": ([], lambda L: L.tril_indices(4, 3, 1), False),
    "triu_indices": ([], lambda L: L.triu_indices(3, 5, -1), False),
    "block_diag": ([f32(2, 3), f32(1), f32(2, 2)], lambda L, a, b, c: L.block_diag(a, b, c), True),
    "cartesian_prod": ([f32(3), f32(2)], lambda L, a, b: L.cartesian_prod(a, b), True),
    "vander": ([f32(4)], lambda L, a: L.vander(a, 3), False),  # torch 1.13's backward fails (in-place)
    "index_add": ([f32(5, 3), f32(4, 3), np.array([0, 2, 2, 4])],
                  lambda L, x, s, i: L.index_add(x, 0, i, s, alpha=2), True),
    "index_fill": ([f32(3, 5), np.array([1, 3])], lambda L, x, i: L.index_fill(x, 1, i, -1.5), True),
    "index_copy": ([f32(5, 3), f32(2, 3), np.array([4, 1])], lambda L, x, s, i: L.index_copy(x, 0, i, s), True),
    "scatter": ([f32(3, 5), f32(3, 3), np.array([[0, 1, 2], [4, 3, 2], [1, 0, 4]])],
                lambda L, x, s, i: L.scatter(x, 1, i, s), True),
    "scatter_larger_src": ([f32(3, 5), f32(3, 5), np.array([[0, 1], [4, 3], [1, 0]])],  # torch 1.13 has no
                           lambda L, x, s, i: L.scatter(x, 1, i, s), False),  # gradient for this form
    "scatter_value": ([f32(3, 5), np.array([[0, 1], [4, 3], [1, 0]])], lambda L, x, i: L.scatter(x, 1, i, 2.5), True),
    "scatter_add": ([f32(3, 5), f32(3, 2), np.array([[0, 0], [4, 3], [1, 1]])],
                    lambda L, x, s, i: L.scatter(x, 1, i, s, reduce="add"), False),  # torch: no derivative
    "take": ([f32(3, 4), np.array([[0, 5], [11, 3]])], lambda L, x, i: L.take(x, i), True),
    "take_along_dim": ([f32(3, 4), np.array([[0], [3], [1]])], lambda L, x, i: L.take_along_dim(x, i, 1), True),
    "isclose": ([np.array([1.0, 1.0, np.inf, np.nan, 1.0], np.float32),
                 np.array([1.0 + 1e-6, 1.1, np.inf, np.nan, np.inf], np.float32)],
                lambda L, a, b: L.stack([L.isclose(a, b), L.isclose(a, b, equal_nan=True)]), False),
    "isin": ([ints(6, 3, 4), np.array([1, 4])], lambda L, x, t: L.isin(x, t), False),
    "searchsorted": ([SORTED, f32(2, 3)], lambda L, s, v: L.stack([L.searchsorted(s, v),
                                                                  L.searchsorted(s, v, right=True)]), False),
    "searchsorted_rows": ([np.sort(f32(2, 5), 1), f32(2, 3)], lambda L, s, v: L.searchsorted(s, v), False),
    "bucketize": ([f32(3, 4), SORTED], lambda L, v, b: L.bucketize(v, b, right=True), False),
    "bincount": ([ints(7, 20)], lambda L, x: L.bincount(x, minlength=9), False),
    "bincount_weights": ([ints(5, 20), f32(20)], lambda L, x, w: L.bincount(x, w), False),
    "unique_consecutive": ([np.array([1, 1, 2, 2, 3, 1, 1, 2])],
                           lambda L, x: L.stack(list(L.unique_consecutive(x, return_inverse=True,
                                                                         return_counts=True)[1:2])), False),
    "unique_consecutive_vals": ([np.array([1, 1, 2, 2, 3, 1, 1, 2])],
                                lambda L, x: L.cat(list(L.unique_consecutive(x, return_counts=True))), False),
    "kthvalue": ([f32(3, 7)], lambda L, x: L.kthvalue(x, 3, 1).values, True),
    "kthvalue_idx": ([f32(3, 7)], lambda L, x: L.kthvalue(x, 2, 0, keepdim=True).indices, False),
    "median": ([f32(4, 6)], lambda L, x: L.median(x), True),
    "median_dim": ([f32(4, 6)], lambda L, x: L.median(x, 1).values, True),
    "msort": ([f32(4, 3)], lambda L, x: L.msort(x), True),
    "quantile": ([f32(3, 8)], lambda L, x: L.quantile(x, L.tensor([0.1, 0.5, 0.9]), dim=1, keepdim=True), True),
    "quantile_flat": ([f32(3, 8)], lambda L, x: L.quantile(x, 0.3), True),
    "quantile_modes": ([f32(9)], lambda L, x: L.stack([L.quantile(x, 0.37, interpolation=m) for m in
                                                       ("lower", "higher", "midpoint", "nearest")]), True),
    "var_mean": ([f32(3, 5)], lambda L, x: L.stack(list(L.var_mean(x, 1))), True),
    "std_mean": ([f32(3, 5)], lambda L, x: L.stack(list(L.std_mean(x, 0, unbiased=False))), True),
    "logcumsumexp": ([f32(3, 5) * 20], lambda L, x: L.logcumsumexp(x, 1), True),
    "trapezoid": ([f32(3, 5)], lambda L, y: L.trapezoid(y, dx=0.5), True),
    "trapezoid_x": ([f32(3, 5), np.sort(f32(5))], lambda L, y, x: L.trapezoid(y, x), True),
    "cdist": ([f32(2, 4, 3), f32(2, 5, 3)], lambda L, a, b: L.cdist(a, b), True),
    "cdist_p1": ([f32(4, 3), f32(5, 3)], lambda L, a, b: L.cdist(a, b, p=1), True),
    "cdist_p3": ([f32(4, 3), f32(5, 3)], lambda L, a, b: L.cdist(a, b, p=3), True),
    "cdist_same": ([f32(4, 3)], lambda L, a: L.cdist(a, a), True),
    "dist": ([f32(3, 4), f32(3, 4)], lambda L, a, b: L.dist(a, b, 3), True),
    "logspace": ([], lambda L: L.logspace(-1, 2, 7), False),
    # ops of the table (src/ops/unary.c, binary.c)
    "asin": ([R.uniform(-0.95, 0.95, (3, 4)).astype(np.float32)], lambda L, x: L.asin(x), True),
    "acos": ([R.uniform(-0.95, 0.95, (3, 4)).astype(np.float32)], lambda L, x: L.acos(x), True),
    "atan": ([f32(3, 4) * 3], lambda L, x: L.atan(x), True),
    "sinh": ([f32(3, 4) * 2], lambda L, x: L.sinh(x), True),
    "asinh": ([f32(3, 4) * 5], lambda L, x: L.asinh(x), True),
    "atanh": ([R.uniform(-0.9, 0.9, (3, 4)).astype(np.float32)], lambda L, x: L.atanh(x), True),
    "expm1": ([np.array([1e-8, -1e-5, 0.5, -3.0], np.float32)], lambda L, x: L.expm1(x), True),
    "exp2": ([f32(3, 4) * 4], lambda L, x: L.exp2(x), True),
    "erfc": ([f32(3, 4) * 2], lambda L, x: L.erfc(x), True),
    "atan2": ([f32(3, 4), f32(4)], lambda L, y, x: L.atan2(y, x), True),
    "atan2_quadrants": ([np.array([0.0, 1.0, -1.0, 0.0, -0.0], np.float32), np.array([-1.0, -1.0, -1.0, 1.0, -1.0],
                                                                                    np.float32)],
                        lambda L, y, x: L.atan2(y, x), False),
    "atan2_int": ([ints(5, 4), ints(5, 4) + 1], lambda L, y, x: L.atan2(y, x), False),
    "angle_real": ([SPECIAL], lambda L, x: L.angle(x), False),
    "logspace_base": ([], lambda L: L.logspace(0, 4, 5, base=2.0), False),
    # the special functions of the op table: values and gradients, and their poles and domains
    "acosh": ([pos(3, 4) * 5 + 1], lambda L, x: L.acosh(x), True),
    "arccosh_domain": ([np.array([0.5, 1.0, 2.0, np.inf, np.nan], np.float32)], lambda L, x: L.arccosh(x), False),
    "cosh_wide": ([np.array([-90.0, -3.0, 0.0, 2.5, 89.0, 100.0], np.float32)], lambda L, x: L.cosh(x), False),
    "lgamma": ([NEG_GAMMA], lambda L, x: L.lgamma(x), True),
    "lgamma_poles": ([POLES], lambda L, x: L.lgamma(x), False),
    "lgamma_int": ([ints(6, 5) + 1], lambda L, x: L.lgamma(x), False),
    "digamma": ([NEG_GAMMA], lambda L, x: L.digamma(x), True),
    "digamma_poles": ([POLES], lambda L, x: L.digamma(x), False),
    "digamma_int": ([ints(6, 5) - 2], lambda L, x: L.special.digamma(x), False),
    "polygamma0": ([pos(5) * 4], lambda L, x: L.polygamma(0, x), True),
    "polygamma1": ([NEG_GAMMA], lambda L, x: L.polygamma(1, x), True),
    "polygamma2": ([NEG_GAMMA], lambda L, x: L.polygamma(2, x), True),
    "polygamma3_method": ([pos(2, 3) * 3], lambda L, x: x.polygamma(3), True),
    "polygamma_poles": ([POLES], lambda L, x: L.polygamma(2, x), False),
    "erfinv": ([R.uniform(-0.95, 0.95, (3, 4)).astype(np.float32)], lambda L, x: L.erfinv(x), True),
    "erfinv_tails": ([np.array([-0.999, 0.99, 0.9999, -0.5, 0.51], np.float32)], lambda L, x: L.erfinv(x), True),
    "erfinv_domain": ([np.array([-1.0, 1.0, 0.0, -0.0, 1.5, -2.0, np.nan], np.float32)], lambda L, x: L.erfinv(x),
                      False),
    "bitwise_and": ([INTS_A, INTS_B], lambda L, a, b: L.bitwise_and(a, b), False),
    "bitwise_or_i32": ([INTS_A.astype(np.int32), INTS_B[0].astype(np.int32)], lambda L, a, b: L.bitwise_or(a, b),
                       False),
    "bitwise_xor_scalar": ([INTS_A], lambda L, a: L.bitwise_xor(a, 5), False),
    "bitwise_not": ([INTS_A], lambda L, a: L.bitwise_not(a), False),
    "bitwise_not_u8": ([np.array([0, 5, 255], np.uint8)], lambda L, a: L.bitwise_not(a), False),
    "bitwise_bool": ([BOOLS, BOOLS[::-1].copy()], lambda L, a, b: L.stack([a & b, a | b, a ^ b, ~a, L.bitwise_not(b)]),
                     False),
    "bitwise_operators": ([INTS_A, INTS_B], lambda L, a, b: (a & b) + (a | 6) * 2 + (3 ^ b) * 3 + ~a, False),
    # shifts within the width (torch 1.13 leaves the others to C, where they are undefined)
    "bitwise_shifts": ([INTS_A, INTS_B % 12], lambda L, a, b: L.stack([L.bitwise_left_shift(a, b),
                                                                     L.bitwise_right_shift(a, b)]), False),
    "bitwise_shift_operators_u8": ([np.array([1, 200, 255, 7], np.uint8), np.array([0, 1, 7, 3], np.uint8)],
                                   lambda L, a, b: L.stack([a << b, a >> b, (a << 2) >> 1]), False),
    "bitwise_shift_i8_i32": ([np.array([-128, -5, 100, 3], np.int8), np.array([-7, 1000, -70000, 5], np.int32)],
                             lambda L, a, b: L.stack([(a >> 3).int(), (a << 1).int(), b >> 4, b << 9,
                                                      L.bitwise_right_shift(b, 31)]), False),
    "gcd": ([INTS_A, INTS_B], lambda L, a, b: L.gcd(a, b), False),
    "lcm": ([INTS_A, INTS_B], lambda L, a, b: L.lcm(a, b), False),
    "special_multigammaln": ([pos(3, 4) + 2], lambda L, x: L.special.multigammaln(x, 3), True),
    "special_ndtr_ndtri": ([R.uniform(0.05, 0.95, (2, 3)).astype(np.float32)],
                           lambda L, x: L.special.ndtr(L.special.ndtri(x) * 0.7), True),
    "special_xlog1py_entr": ([np.array([0.0, 1.0, 2.5, 0.0, -1.0], np.float32), np.array([np.nan, 3.0, 0.5, 1.0, 2.0],
                                                                                         np.float32)],
                             lambda L, x, y: L.stack([L.special.xlog1py(x, y), L.special.entr(x)]), False),
    "special_erfcx_gammaln": ([f32(2, 3)], lambda L, x: L.special.erfcx(x) + L.special.gammaln(x.abs() + 0.5)
                              + L.special.psi(x.abs() + 0.5), True),
    # scans and order statistics: zeros for cumprod's gradient, ties and NaN for cummax/cummin/mode
    "cumprod": ([f32(3, 4)], lambda L, x: L.cumprod(x, 1), True),
    "cumprod_zeros": ([ZEROS_LINES], lambda L, x: L.cumprod(x, 1), True),
    "cumprod_zeros_dim0": ([ZEROS_LINES.T.copy()], lambda L, x: x.cumprod(0), True),
    "cumprod_double_backward": ([ZEROS_LINES], lambda L, x: L.autograd.grad((L.cumprod(x, 1) ** 2).sum(), x,
                                                                            create_graph=True)[0], True),
    "cumprod_int": ([ints(4, 3, 4) - 1], lambda L, x: L.cumprod(x, 0), False),
    "cummax": ([TIES_NAN], lambda L, x: L.cummax(x, 1).values, True),
    "cummax_indices": ([TIES_NAN], lambda L, x: L.cummax(x, 1).indices, False),
    "cummin": ([TIES_NAN.T.copy()], lambda L, x: L.cummin(x, 0).values, True),
    "cummin_indices": ([TIES_NAN.T.copy()], lambda L, x: x.cummin(0).indices, False),
    "cummax_int": ([ints(3, 2, 7)], lambda L, x: L.stack(list(L.cummax(x, -1))), False),
    "mode": ([MODE_ROWS], lambda L, x: L.mode(x, 1).values, True),
    "mode_indices": ([MODE_ROWS], lambda L, x: L.mode(x).indices, False),
    "mode_keepdim_int": ([ints(3, 4, 9)], lambda L, x: L.stack(list(x.mode(0, keepdim=True))), False),
    "nanmedian": ([NAN_ROWS], lambda L, x: L.nanmedian(x), True),
    "nanmedian_dim": ([NAN_ROWS[:2]], lambda L, x: L.nanmedian(x, 1).values, True),
    # an all-NaN line: NaN (torch's index there depends on its selection algorithm; oar's is 0)
    "nanmedian_all_nan": ([NAN_ROWS], lambda L, x: L.nanmedian(x, 1).values, False),
    "nanmedian_indices": ([NAN_ROWS[:2]], lambda L, x: L.nanmedian(x, 1, keepdim=True).indices, False),
    "nanquantile": ([NAN_ROWS], lambda L, x: L.nanquantile(x, L.tensor([0.0, 0.25, 0.6, 1.0]), dim=1), True),
    "nanquantile_flat_modes": ([NAN_ROWS], lambda L, x: L.stack([L.nanquantile(x, 0.4, interpolation=m) for m in
                                                                 ("linear", "lower", "higher", "midpoint", "nearest")]),
                               True),
    "quantile_nan": ([NAN_ROWS], lambda L, x: L.quantile(x, 0.5, dim=1, keepdim=True), False),
    # scatter_reduce: every reduction with and without the input, slots reached 0, 1 and 3 times (ties, zeros)
    # (without the input, its value is moved off the src values: torch 1.13 still counts a tie with an
    # excluded input when it splits an amax/amin gradient; oar gives the whole gradient to the src element)
    **{f"scatter_reduce_{r}_{int(inc)}": ([SR_SELF if inc else SR_SELF + 0.25, SR_SRC],
                                          lambda L, x, s, r=r, inc=inc: L.scatter_reduce(
        x, 1, L.tensor(SR_INDEX), s, r, include_self=inc), True)
       for r in ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)},
    "scatter_reduce_int_mean": ([ints(9, 2, 4) - 4, ints(9, 2, 5) - 4],
                                lambda L, x, s: x.scatter_reduce(1, L.tensor(SR_INDEX), s, "mean"), False),
    "scatter_multiply": ([SR_SELF, SR_SRC], lambda L, x, s: L.scatter(x, 1, L.tensor(SR_INDEX), s,
                                                                     reduce="multiply"), False),
    "masked_scatter": ([f32(3, 4), f32(12)], lambda L, x, s: x.masked_scatter(L.tensor(MASK34), s), True),
    "masked_scatter_broadcast": ([f32(3, 4), f32(3, 4)], lambda L, x, s: L.masked_scatter(
        x, L.tensor(MASK34[0]), s), True),
    "as_strided_windows": ([f32(3, 4)], lambda L, x: L.as_strided(x, (3, 3), (2, 1), 1), True),
    "as_strided_method": ([f32(12)], lambda L, x: x.as_strided((4, 3), (1, 4)) * 2, True),
    "cross": ([f32(4, 3), f32(4, 3)], lambda L, a, b: L.cross(a, b), True),
    "cross_dim_broadcast": ([f32(3, 5), f32(3, 1)], lambda L, a, b: L.cross(a, b, dim=0), True),
    "linalg_cross": ([f32(2, 3, 3), f32(2, 1, 3)], lambda L, a, b: L.linalg.cross(a, b), True),
    "aminmax": ([f32(3, 5)], lambda L, x: L.stack(list(L.aminmax(x, dim=1))), False),  # torch: no derivative
    "aminmax_all_keepdim": ([f32(2, 3)], lambda L, x: L.cat([t.reshape(-1) for t in L.aminmax(x, keepdim=True)]), False),
    "aminmax_method": ([f32(4)], lambda L, x: L.stack(list(x.aminmax())), False),
    "argwhere": ([np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]], np.float32)], lambda L, x: L.argwhere(x), False),
    "combinations": ([f32(4)], lambda L, x: L.combinations(x), True),
    "combinations_r3_repl": ([f32(3)], lambda L, x: L.combinations(x, 3, with_replacement=True), True),
    "copysign": ([f32(3, 4)], lambda L, x: L.copysign(x, L.tensor([1.0, -1.0, 0.0, -0.0])), True),
    "copysign_scalar_int": ([ints(5, 4)], lambda L, x: L.copysign(x, -2.0), False),
    "frexp": ([np.array([0.0, 1.0, -3.5, 0.5, 1024.0, 1e-30, 7.25e20, -0.75], np.float32)],
              lambda L, x: L.stack([L.frexp(x).mantissa, L.frexp(x).exponent.to(L.float32)]), False),
    "ldexp": ([f32(2, 3), ints(5, 2, 3)], lambda L, x, e: L.ldexp(x, e), True),
    "addr": ([f32(3, 4), f32(3), f32(4)], lambda L, m, a, b: L.addr(m, a, b, beta=0.5, alpha=2.0), True),
    "addbmm": ([f32(3, 4), f32(2, 3, 5), f32(2, 5, 4)], lambda L, m, a, b: L.addbmm(m, a, b, alpha=0.5), True),
    "renorm": ([f32(3, 4) * 3], lambda L, x: L.renorm(x, 2, 0, 1.5), True),
    "renorm_p1_dim1": ([f32(2, 3, 4) * 3], lambda L, x: x.renorm(1, 1, 2.0), True),
    "cumulative_trapezoid": ([f32(3, 5)], lambda L, y: L.cumulative_trapezoid(y, dx=0.5), True),
    "cumulative_trapezoid_x": ([f32(2, 4), np.array([0.0, 0.5, 1.5, 2.0], np.float32)],
                               lambda L, y, x: L.cumulative_trapezoid(y, x), True),
    "cov": ([f32(3, 7)], lambda L, x: L.cov(x), True),
    "cov_1d": ([f32(7)], lambda L, x: L.cov(x, correction=0), True),
    "cov_weights": ([f32(3, 6), pos(6)], lambda L, x, a: L.cov(x, fweights=L.tensor([1, 2, 1, 3, 1, 2]),
                                                               aweights=a), True),
    "corrcoef": ([f32(4, 9)], lambda L, x: L.corrcoef(x), True),
    "pdist": ([f32(5, 3)], lambda L, x: L.pdist(x), True),
    "pdist_p1_inf": ([f32(4, 3)], lambda L, x: L.stack([L.pdist(x, 1), L.pdist(x, math.inf), L.pdist(x, 3)]), True),
    "diff": ([f32(3, 5)], lambda L, x: L.diff(x, n=2, dim=1, prepend=L.zeros(3, 1)), True),
    "linalg_vector_norm": ([f32(3, 4)], lambda L, x: L.stack([L.linalg.vector_norm(x), L.linalg.norm(x),
                                                              L.linalg.matrix_norm(x)]), True),
    # LAPACK (builds with OpenBLAS): values and gradients, batched; cholesky's gradient is torch's
    # symmetrized rule, so it is checked here rather than by finite differences
    **({
        "linalg_det": ([f32(2, 4, 4)], lambda L, a: L.linalg.det(a), True),
        "det_logdet": ([SPD + 0.1 * f32(3, 3)], lambda L, a: L.stack([L.det(a), L.logdet(a), a.det()]), True),
        "logdet_negative_singular": ([np.array([[[0.0, 1.0], [1.0, 0.0]], [[1.0, 2.0], [2.0, 4.0]]], np.float32)],
                                     lambda L, a: L.logdet(a), False),
        "slogdet": ([f32(3, 3, 3)], lambda L, a: L.stack(list(L.linalg.slogdet(a))), True),
        "slogdet_singular": ([np.array([[1.0, 2.0], [2.0, 4.0]], np.float64)], lambda L, a: L.stack(list(L.slogdet(a))),
                             False),
        "inv": ([f32(2, 3, 3) + 3 * np.eye(3, dtype=np.float32)], lambda L, a: L.linalg.inv(a), True),
        "inverse_f64": ([SPD.astype(np.float64)], lambda L, a: L.inverse(a) @ a, True),
        "solve": ([SPD, f32(3, 2)], lambda L, a, b: L.linalg.solve(a, b), True),
        "solve_vector": ([SPD, f32(3)], lambda L, a, b: L.linalg.solve(a, b), True),
        "cholesky": ([SPD], lambda L, a: L.linalg.cholesky(a), True),
        "cholesky_upper_batched": ([np.stack([SPD, SPD * 2 + np.eye(3, dtype=np.float32)])],
                                   lambda L, a: L.linalg.cholesky(a, upper=True), True),
    } if "linalg_det" in oar._ops.ID else {}),
    "gcd_lcm_zeros": ([np.array([0, 0, -7, 12], np.int64), np.array([0, -5, 0, -18], np.int64)],
                      lambda L, a, b: L.stack([L.gcd(a, b), L.lcm(a, b), a.gcd(b), a.lcm(b)]), False),
}


def _run(lib, arrays, call, grad):
    ts = []
    for a in arrays:
        t = lib.tensor(a)
        if grad and np.issubdtype(a.dtype, np.floating):
            t.requires_grad_(True)
        ts.append(t)
    return ts, call(lib, *ts)


@pytest.mark.parametrize("name", sorted(CASES))
def test_composition_matches_torch(torch, name):
    arrays, call, differentiable = CASES[name]
    o_in, o_out = _run(oar, arrays, call, differentiable)
    t_in, t_out = _run(torch, arrays, call, differentiable)
    o, t = o_out.detach().numpy(), t_out.detach().numpy()
    assert o.shape == t.shape, f"{name}: shape {o.shape}, torch's {t.shape}"
    assert o.dtype == t.dtype or (o.dtype.kind == t.dtype.kind == "i"), f"{name}: dtype {o.dtype}, torch's {t.dtype}"
    np.testing.assert_allclose(o.astype(np.float64), t.astype(np.float64), rtol=2e-5, atol=2e-6, equal_nan=True,
                               err_msg=name)
    if differentiable and t_out.dtype.is_floating_point:
        g = R.standard_normal(t.shape).astype(t.dtype)
        (o_out * oar.tensor(g)).sum().backward()
        (t_out * torch.tensor(g)).sum().backward()
        for k, (oi, ti) in enumerate(zip(o_in, t_in)):
            if ti.grad is not None:
                assert oi.grad is not None, f"{name}: no gradient for input {k}"
                np.testing.assert_allclose(oi.grad.numpy(), ti.grad.numpy(), rtol=2e-4, atol=2e-5,
                                           err_msg=f"{name} d/d input {k}")


def test_shifts_out_of_range_as_numpy():
    """Shifts by the width or more, or by a negative amount, are defined as NumPy defines them (0, or -1
    for >> of a negative value); torch 1.13 leaves them to C."""
    for dt in (np.int8, np.uint8, np.int32, np.int64):
        bits = np.iinfo(dt).bits
        a = np.array([1, 3, 100, 127, 5, 64], dt)
        if dt != np.uint8:
            a = a * np.array([1, -1, 1, -1, 1, -1], dt)
        b = np.array([0, bits - 1, bits, bits + 5, 1, 100], dt)
        if dt != np.uint8:
            b[4] = -1
        for name, ref in (("bitwise_left_shift", np.left_shift), ("bitwise_right_shift", np.right_shift)):
            got = getattr(oar, name)(oar.from_numpy(a), oar.from_numpy(b)).numpy()
            np.testing.assert_array_equal(got, ref(a, b), err_msg=f"{name} {dt.__name__}")


def test_allclose_equal_broadcast_shapes(torch):
    a = f32(3, 4)
    assert oar.allclose(oar.tensor(a), oar.tensor(a + 1e-7)) == torch.allclose(torch.tensor(a), torch.tensor(a + 1e-7))
    assert oar.equal(oar.tensor(a), oar.tensor(a)) and not oar.equal(oar.tensor(a), oar.tensor(a[:2]))
    assert tuple(oar.broadcast_shapes((3, 1), (4,), 1)) == tuple(torch.broadcast_shapes((3, 1), (4,), 1))
    with pytest.raises(RuntimeError, match="Shape mismatch"):
        oar.broadcast_shapes((3,), (4,))


def test_inplace_forms():
    """addcmul_ / addcdiv_ / lerp_ (what hand-written optimizers use) and the index updates in place"""
    x, a, b = f32(3, 4), f32(3, 4), pos(3, 4)
    t = oar.tensor(x)
    t.addcmul_(oar.tensor(a), oar.tensor(b), value=0.5).addcdiv_(oar.tensor(a), oar.tensor(b), value=-1.0)
    np.testing.assert_allclose(t.numpy(), x + 0.5 * a * b - a / b, rtol=1e-6, atol=1e-6)
    t.lerp_(oar.zeros(3, 4), 0.25)
    np.testing.assert_allclose(t.numpy(), 0.75 * (x + 0.5 * a * b - a / b), rtol=1e-5, atol=1e-6)
    u = oar.zeros(4, 2)
    u.index_add_(0, oar.tensor([1, 1, 3]), oar.ones(3, 2))
    assert u[:, 0].tolist() == [0.0, 2.0, 0.0, 1.0]


def test_sampling():
    oar.manual_seed(5)
    p = oar.tensor([[0.0, 1.0, 3.0], [2.0, 0.0, 2.0]])
    with_r = oar.multinomial(p, 4000, replacement=True)
    counts = oar.stack([oar.bincount(with_r[i], minlength=3) for i in range(2)]).to(oar.float32) / 4000
    np.testing.assert_allclose(counts.numpy(), (p / p.sum(1, keepdim=True)).numpy(), atol=0.03)
    without = oar.multinomial(p, 2)
    for row, nonzero in zip(without.tolist(), ([1, 2], [0, 2])):
        assert sorted(row) == nonzero  # every index once, zero weights never
    with pytest.raises(RuntimeError, match="without replacement"):
        oar.multinomial(p, 4)
    assert tuple(oar.multinomial(oar.tensor([1.0, 2.0]), 3, True).shape) == (3,)
    b = oar.bernoulli(oar.full((20000,), 0.3))
    assert abs(b.mean().item() - 0.3) < 0.02 and set(b.unique().tolist()) <= {0.0, 1.0}
    n = oar.normal(2.0, 3.0, size=(20000,))
    assert abs(n.mean().item() - 2.0) < 0.1 and abs(n.std().item() - 3.0) < 0.1
    assert math.isfinite(oar.normal(oar.zeros(3), oar.ones(3)).sum().item())


def test_predicates_and_their_errors(torch):
    for lib in (oar, torch):
        assert lib.is_nonzero(lib.tensor([2.5])) and not lib.is_nonzero(lib.tensor(0))
        assert lib.is_same_size(lib.ones(2, 3), lib.zeros(2, 3)) and not lib.is_same_size(lib.ones(2), lib.ones(3))
        assert lib.is_signed(lib.ones(1)) and lib.is_signed(lib.ones(1, dtype=lib.int8))
        assert not lib.is_signed(lib.ones(1, dtype=lib.uint8)) and not lib.is_signed(lib.ones(1, dtype=lib.bool))
        x = lib.ones(2)
        assert lib.positive(x) is x
        with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
            lib.is_nonzero(lib.ones(2))
        with pytest.raises(RuntimeError, match="no values is ambiguous"):
            lib.is_nonzero(lib.ones(0))
        with pytest.raises(RuntimeError, match="Expect a 1D vector"):
            lib.combinations(lib.ones(2, 2))
        with pytest.raises(RuntimeError, match="only supports floating-point dtypes"):
            lib.frexp(lib.ones(2, dtype=lib.int64))
    assert tuple(oar.combinations(oar.ones(1), 2).shape) == tuple(torch.combinations(torch.ones(1), 2).shape)
