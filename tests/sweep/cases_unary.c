/* Sweep cases for elementwise unary ops, and the larger cases that exercise the AVX2
 * elementwise kernels (vector tails, broadcast forms, threading).
 * Ops with a kink use 'd' inputs of even size: odd multiples of 0.125, never 0 or a round bound.
 * 'd' of odd size holds multiples of 0.25 (0 and the halves included): used for rounding ops. */
#include "sweep.h"

#include <math.h>

/* Big cases skip the gradient check (it costs two forward passes per element). */
#define BIG SWEEP_NO_GRAD

const sweep_case sweep_cases_unary[] = {
    {"neg", "n:3x4", ""},
    {"neg", "n:", ""},
    {"neg", "i-9_9:5", ""},
    {"neg", "i0_255u8:6", ""},
    {"neg", "n:3x67", "", BIG},
    {"abs", "d:3x4", ""},
    {"abs", "d:2x1x3", ""},
    {"abs", "i-9_9:2x5", ""},
    {"abs", "i-128_127i8:8", ""},
    {"abs", "n:0x3", ""},
    {"abs", "n:3x67", "", BIG},
    {"exp", "n:3x4", ""},
    {"exp", "n:0", ""},
    {"exp", "n:1x1", ""},
    {"exp", "n:3x67", "", BIG},
    {"log", "p:3x4", ""},
    {"log", "p:1x5", ""},
    {"log", "p:3x67", "", BIG},
    {"log1p", "p:3x4", ""},
    {"log1p", "u:2x5", ""},
    {"log1p", "n:0", ""},
    {"sqrt", "p:3x4", ""},
    {"sqrt", "p:", ""},
    {"sqrt", "p:3x67", "", BIG},
    {"rsqrt", "p:3x4", ""},
    {"rsqrt", "p:2x1", ""},
    {"square", "n:3x4", ""},
    {"square", "i-9_9:6", ""},
    {"square", "n:0x2", ""},
    {"square", "n:3x67", "", BIG},
    {"sin", "n:3x4", ""},
    {"sin", "n:1", ""},
    {"cos", "n:3x4", ""},
    {"cos", "n:2x0", ""},
    {"tanh", "n:3x4", ""},
    {"tanh", "u:5", ""},
    {"tanh", "n:3x67", "", BIG},
    {"sigmoid", "n:3x4", ""},
    {"sigmoid", "n:1x1x3", ""},
    {"sigmoid", "n:3x67", "", BIG},
    {"relu", "d:3x4", ""},
    {"relu", "n:1", ""},
    {"relu", "i-5_5:7", ""},
    {"relu", "n:3x67", "", BIG},
    {"leaky_relu", "d:3x4", "negative_slope=0.01"},
    {"leaky_relu", "d:2x3", "negative_slope=-0.3"},
    {"leaky_relu", "n:3x67", "negative_slope=0.2", BIG},
    {"elu", "d:3x4", "alpha=1"},
    {"elu", "d:2x2", "alpha=0.5"},
    {"elu", "n:0", "alpha=1"},
    {"gelu", "n:3x4", "approximate=0"},
    {"gelu", "n:3x4", "approximate=1"},
    {"gelu", "n:1x5", "approximate=0"},
    {"gelu", "n:3x67", "approximate=0", BIG},
    {"gelu", "n:3x67", "approximate=1", BIG},
    /* gelu_backward(grad, x): the op gelu's rule calls */
    {"gelu_backward", "n:3x4;n:3x4", "approximate=0"},
    {"gelu_backward", "n:3x4;n:3x4", "approximate=1"},
    {"gelu_backward", "n:;n:", "approximate=1"},
    {"gelu_backward", "n:0x3;n:0x3", "approximate=0"},
    {"gelu_backward", "n:3x67;n:3x67", "approximate=0", BIG},
    {"gelu_backward", "n:3x67;n:3x67", "approximate=1", BIG},
    {"gelu_backward", "n:5x4099;n:5x4099", "approximate=1", BIG}, /* split over threads */
    /* relu_backward(grad, x): relu's rule; x from distinct values (no kink at 0), or with zeros */
    {"relu_backward", "n:3x4;d:3x4", ""},
    {"relu_backward", "n:2x3x5;d:2x3x5", ""},
    {"relu_backward", "n:;p:", ""},
    {"relu_backward", "n:0x4;d:0x4", ""},
    {"relu_backward", "n:5x4099;u:5x4099", "", BIG},
    {"relu_backward", "n:3x67;d:3x67", "", BIG}, /* odd size: contains 0 */
    {"silu", "n:3x4", ""},
    {"silu", "n:", ""},
    {"silu", "n:3x67", "", BIG},
    {"softplus", "n:3x4", "beta=1 threshold=20"},
    {"softplus", "d:4x4", "beta=2 threshold=1"}, /* both branches; 0.5 (the switch) is no input */
    {"softplus", "n:2x3", "beta=-0.5 threshold=20"},
    {"erf", "n:3x4", ""},
    {"erf", "u:1x6", ""},
    {"erfc", "n:3x4", ""},
    {"erfc", "n:0", ""},
    /* the inverse sine, cosine and hyperbolic tangent inside (-1, 1): 'u' */
    {"asin", "u:3x4", ""},
    {"asin", "u:", ""},
    {"acos", "u:3x4", ""},
    {"acos", "u:2x0", ""},
    {"atan", "n:3x4", ""},
    {"atan", "n:3x67", "", BIG},
    {"sinh", "n:3x4", ""},
    {"sinh", "u:5", ""},
    {"asinh", "n:3x4", ""},
    {"asinh", "n:1x1", ""},
    {"atanh", "u:3x4", ""},
    {"expm1", "n:3x4", ""},
    {"expm1", "u:7", ""},
    {"exp2", "n:3x4", ""},
    {"exp2", "n:3x67", "", BIG},
    /* acosh inside its domain x >= 1; cosh over both signs */
    {"acosh", "c1.25,1.5,2.0,3.5,7.0,1.1:2x3", ""},
    {"cosh", "n:3x4", ""},
    {"cosh", "n:3x67", "", BIG},
    /* the gamma family on positives, and on negatives between the poles (reflection) */
    {"lgamma", "p:3x4", ""},
    {"lgamma", "c-2.5,-0.5,0.3,4.2,7.5,12.25,-3.75:7", ""},
    {"digamma", "p:3x4", ""},
    {"digamma", "c-2.5,-0.5,0.3,4.2,7.5,12.25,-3.75,25.5:8", ""},
    {"polygamma", "p:3x4", "n=1"},
    {"polygamma", "c-2.5,-0.5,0.3,4.2,7.5,12.25,-3.75:7", "n=1"},
    {"polygamma", "c-2.5,-0.5,0.3,4.2,7.5,12.25:6", "n=2"},
    {"polygamma", "p:2x3", "n=3"},
    {"polygamma", "p:5", "n=0"},
    /* erfinv inside (-1, 1), and its tails (the erfc branch) */
    {"erfinv", "u:3x4", ""},
    {"erfinv", "c-0.999,-0.9,0.6,0.95,0.9999,-0.51:6", ""},
    /* integers only, every width (wrapping as C's ~) */
    {"bitwise_not", "i-50_50:3x4", ""},
    {"bitwise_not", "i0_256u8:7", ""},
    {"bitwise_not", "i-128_128i8:2x5", ""},
    {"bitwise_not", "i-1000_1000i32:6", ""},
    {"clip", "d:3x4", "min=-0.5 max=0.75"},
    {"clip", "d:2x4", "min=-inf max=0.5"},
    {"clip", "d:2x4", "min=1 max=-1"}, /* min > max: every element is max, no gradient */
    {"clip", "i-9_9:3x4", "min=-3 max=4"},
    {"clip", "i0_200u8:6", "min=10 max=inf"},
    {"clip", "n:3x67", "min=-0.5 max=0.75", BIG},
    {"sign", "d:13", ""},
    {"sign", "i-3_3:2x3", ""},
    {"sign", "b:5", ""},
    {"floor", "d:13", ""},
    {"floor", "n:2x3", ""},
    {"floor", "i-5_5:4", ""},
    {"ceil", "d:13", ""},
    {"ceil", "n:0", ""},
    {"round", "d:13", ""}, /* +-0.5 and +-1.5 round to even */
    {"round", "n:3x4", ""},
    {"round", "i-5_5:4", ""},
    /* Binary cases for the AVX2 binary kernels: every form they accept, with vector tails. */
    {"add", "n:3x67;n:3x67", "", BIG},
    {"add", "n:3x67;n:", "", BIG},
    {"add", "n:1;n:3x67", "", BIG},
    {"add", "n:3x67;n:67", "", BIG},
    {"add", "n:67;n:3x67", "", BIG},
    {"add", "n:2x3x5;n:1x5", "", BIG},
    {"sub", "n:3x67;n:3x67", "", BIG},
    {"sub", "n:;n:3x67", "", BIG},
    {"sub", "n:67;n:3x67", "", BIG},
    {"mul", "n:3x67;n:3x67", "", BIG},
    {"mul", "n:3x67;n:1x67", "", BIG},
    {"mul", "n:3x67;n:1x1", "", BIG},
    {"div", "n:3x67;p:3x67", "", BIG},
    {"div", "p:;n:3x67", "", BIG},
    {"div", "n:3x67;p:67", "", BIG},
    {"maximum", "n:3x67;n:3x67", "", BIG},
    {"maximum", "n:3x67;n:", "", BIG},
    {"minimum", "n:3x67;n:3x67", "", BIG},
    {"minimum", "n:67;n:3x67", "", BIG},
    /* Above the threading grain (32768 elements), so the kernels run split over threads. */
    {"add", "n:5x13001;n:13001", "", BIG | SWEEP_NO_STRIDED},
    {"mul", "n:65537;n:", "", BIG | SWEEP_NO_STRIDED},
    {"exp", "n:65537", "", BIG | SWEEP_NO_STRIDED},
    {"gelu", "n:65537", "approximate=0", BIG | SWEEP_NO_STRIDED},
    {0},
};

static oar_tensor *int_tensor(oar_dtype dt) {
    int64_t shape[1] = {3};
    return oar_zeros(shape, 1, dt);
}
static bool bad_exp_int(void) { return oar_exp(int_tensor(OAR_I64)) != NULL; }
static bool bad_abs_bool(void) { return oar_abs(int_tensor(OAR_BOOL)) != NULL; }
static bool bad_gelu_int(void) { return oar_gelu(int_tensor(OAR_I32), false) != NULL; }
static bool bad_softplus_beta(void) { return oar_softplus(oar_scalar(1.0, OAR_F32), 0.0, 20.0) != NULL; }
static bool bad_clip_fraction(void) { return oar_clip(int_tensor(OAR_I64), 0.5, 2.0) != NULL; }
static bool bad_clip_range(void) { return oar_clip(int_tensor(OAR_U8), -1.0, 2.0) != NULL; }
static bool bad_null(void) { return oar_tanh(NULL) != NULL; }
static bool bad_polygamma_order(void) { return oar_polygamma(-1, oar_scalar(1.0, OAR_F32)) != NULL; }
static bool bad_bitwise_not_float(void) { return oar_bitwise_not(oar_scalar(1.0, OAR_F32)) != NULL; }
static bool bad_lgamma_int(void) { return oar_lgamma(int_tensor(OAR_I32)) != NULL; }
static bool bad_gelu_backward(oar_tensor *g, oar_tensor *x, int64_t approximate) {
    oar_attr a = oar_attr_int(approximate);
    oar_tensor *in[2] = {g, x};
    return oar_op_call1(OAR_OP_gelu_backward, in, 2, &a) != NULL;
}
static bool bad_gelu_backward_shape(void) {
    int64_t s1[2] = {2, 3}, s2[2] = {3, 2};
    return bad_gelu_backward(oar_zeros(s1, 2, OAR_F32), oar_zeros(s2, 2, OAR_F32), 1);
}
static bool bad_gelu_backward_dtype(void) {
    int64_t s[2] = {2, 3};
    return bad_gelu_backward(oar_zeros(s, 2, OAR_F32), oar_zeros(s, 2, OAR_F64), 0);
}
static bool bad_gelu_backward_mode(void) {
    int64_t s[2] = {2, 3};
    return bad_gelu_backward(oar_zeros(s, 2, OAR_F32), oar_zeros(s, 2, OAR_F32), 3);
}
static bool bad_relu_backward_shape(void) {
    int64_t s1[2] = {4, 3}, s2[1] = {12};
    oar_tensor *in[2] = {oar_zeros(s1, 2, OAR_F32), oar_zeros(s2, 1, OAR_F32)};
    return oar_op_call1(OAR_OP_relu_backward, in, 2, NULL) != NULL;
}
static bool bad_gelu_mode(void) {
    oar_tensor *x = oar_scalar(1.0, OAR_F32);
    oar_attr a[1] = {oar_attr_int(2)};
    return oar_op_call1(OAR_OP_gelu, &x, 1, a) != NULL;
}

const sweep_bad sweep_bad_unary[] = {
    {"exp of an integer tensor", bad_exp_int, "exp: expected the input to have a floating dtype"},
    {"abs of a bool tensor", bad_abs_bool, "abs: expected a numeric tensor (float or integer), got bool"},
    {"gelu of an i32 tensor", bad_gelu_int, "gelu: expected the input to have a floating dtype"},
    {"softplus with beta 0", bad_softplus_beta, "softplus: expected a nonzero beta"},
    {"clip of an i64 tensor at 0.5", bad_clip_fraction, "clip: expected integer bounds for integer dtype i64, got min=0.5"},
    {"clip of a u8 tensor at -1", bad_clip_range, "clip: expected bounds within the range of u8 [0, 255], got min=-1"},
    {"tanh of NULL", bad_null, "tanh: input 0 is NULL"},
    {"polygamma of order -1", bad_polygamma_order, "polygamma: expected n >= 0"},
    {"bitwise_not of a float", bad_bitwise_not_float, "bitwise_not: expected an integer tensor, got f32"},
    {"lgamma of an i32 tensor", bad_lgamma_int, "lgamma: expected the input to have a floating dtype"},
    {"gelu_backward with an input of another shape", bad_gelu_backward_shape,
     "gelu_backward: expected the gradient and the input to have one shape, got [2, 3] and [3, 2]"},
    {"gelu_backward with an input of another dtype", bad_gelu_backward_dtype,
     "gelu_backward: expected inputs of one dtype, got f32 (input 0) and f64 (input 1)"},
    {"gelu_backward with approximate 3", bad_gelu_backward_mode,
     "gelu_backward: expected approximate 0 (exact, erf) or 1 (tanh), got 3"},
    {"relu_backward with an input of another shape", bad_relu_backward_shape,
     "relu_backward: expected the gradient and the input to have one shape, got [4, 3] and [12]"},
    {"gelu with approximate 2", bad_gelu_mode, "gelu: expected approximate 0 (exact, erf) or 1 (tanh), got 2"},
    {0},
};
