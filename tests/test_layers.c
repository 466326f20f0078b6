/* The built-in layers as modules: parameter names, shapes and counts, torch's default
 * initialization (checked statistically, since oar's generator differs from torch's),
 * train/eval behaviour, printing, freezing, ownership in Sequential, and clear errors for
 * bad arguments and inputs. Values against torch are in test_golden_layers.c. */
#include "test_util.h"

static char fmt_buf[4096];
static const char *fmt(const oar_module *m) {
    oar_module_format(m, fmt_buf, sizeof fmt_buf);
    return fmt_buf;
}

/* All elements as doubles (one copy, rather than t_at per element on large tensors). */
static double *t_values(oar_tensor *t) {
    double *v = malloc(sizeof(double) * (size_t)oar_numel(t));
    oar_copy_to_buffer(t, v, sizeof(double) * (size_t)oar_numel(t), OAR_F64);
    return v;
}

static double t_max_abs(oar_tensor *t) {
    double m = 0, *v = t_values(t);
    for (int64_t i = 0; i < oar_numel(t); i++) m = fmax(m, fabs(v[i]));
    free(v);
    return m;
}

static void t_moments(oar_tensor *t, double *mean, double *var) {
    double s = 0, q = 0, *v = t_values(t);
    int64_t n = oar_numel(t);
    for (int64_t i = 0; i < n; i++) s += v[i];
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) q += (v[i] - *mean) * (v[i] - *mean);
    *var = q / (double)n;
    free(v);
}

static bool same_shape(oar_tensor *t, const int64_t *shape, int ndim) {
    return t && oar_ndim(t) == ndim && memcmp(oar_shape(t), shape, sizeof(int64_t) * (size_t)ndim) == 0;
}

/* U(-b, b) over n values: all inside, the largest within 10/n of b (missed with probability
 * e^-10), mean 0 and variance b^2/3 within 4 standard errors. */
static void check_uniform(oar_tensor *t, double b) {
    double mean, var, n = (double)oar_numel(t);
    t_moments(t, &mean, &var);
    CHECK(t_max_abs(t) <= b * (1 + 1e-6));
    CHECK(t_max_abs(t) >= b * (1 - 10 / n));
    CHECK_NEAR(mean, 0.0, 4 * b / sqrt(3 * n));
    CHECK_NEAR(var, b * b / 3, 4 * b * b * sqrt(4.0 / 45 / n));
}

static void test_linear(void) {
    oar_module *m = oar_nn_linear(4, 8, true);
    const char *name;
    CHECK(oar_module_num_parameters(m) == 2 && oar_module_num_buffers(m) == 0);
    CHECK(same_shape(oar_module_parameter(m, 0, &name), (int64_t[]){8, 4}, 2) && !strcmp(name, "weight"));
    CHECK(same_shape(oar_module_parameter(m, 1, &name), (int64_t[]){8}, 1) && !strcmp(name, "bias"));
    CHECK(oar_requires_grad(oar_module_get(m, "weight")));
    CHECK(oar_module_count_elements(m, false) == 40);
    CHECK(!strcmp(fmt(m), "Linear(in_features=4, out_features=8, bias=true)"));
    oar_tensor *y = oar_forward(m, oar_randn((int64_t[]){2, 3, 4}, 3, OAR_F32)); /* any leading dims */
    CHECK(same_shape(y, (int64_t[]){2, 3, 8}, 3));
    /* loading new values: forward uses them */
    oar_module_set(m, "weight", oar_zeros((int64_t[]){8, 4}, 2, OAR_F32));
    oar_module_set(m, "bias", oar_full((int64_t[]){8}, 1, 0.5, OAR_F32));
    y = oar_forward(m, oar_randn((int64_t[]){2, 4}, 2, OAR_F32));
    CHECK(y && t_at(y, 0) == 0.5 && t_at(y, 15) == 0.5);
    CHECK(oar_requires_grad(oar_module_get(m, "weight"))); /* still a parameter */
    oar_module_free(m);

    m = oar_nn_linear(4, 8, false);
    CHECK(oar_module_num_parameters(m) == 1 && oar_module_count_elements(m, false) == 32);
    CHECK(!strcmp(fmt(m), "Linear(in_features=4, out_features=8, bias=false)"));
    oar_module_free(m);

    /* torch: weight and bias both U(-1/sqrt(fan_in), 1/sqrt(fan_in)) */
    m = oar_nn_linear(100, 300, true);
    check_uniform(oar_module_get(m, "weight"), 0.1);
    check_uniform(oar_module_get(m, "bias"), 0.1);
    oar_module_free(m);

    /* bad input: clear message with the expected shape */
    m = oar_nn_linear(4, 8, true);
    CHECK_ERR(oar_forward(m, oar_randn((int64_t[]){2, 5}, 2, OAR_F32)),
              "Linear: expected an input of shape [..., 4] (in_features = 4), got [2, 5]");
    CHECK_ERR(oar_forward(m, oar_randn((int64_t[]){2, 4}, 2, OAR_F64)), "Linear: expected an input of dtype f32");
    CHECK_ERR(oar_forward(m, NULL), "Linear: expected an input tensor, got NULL");
    oar_tensor *two[2] = {NULL, NULL};
    CHECK(oar_forward_n(m, two, 2, two, 1) != OAR_OK);
    CHECK(strstr(oar_last_error(), "Linear: expected one input and one output, got 2 inputs") != NULL);
    oar_module_free(m);
    CHECK_ERR(oar_nn_linear(-1, 3, true), "Linear: expected in_features >= 0");
}

static void test_conv(void) {
    oar_module *m = oar_nn_conv2d(3, 8, 3, &(oar_conv_opts){.padding = {1, 1}}, true);
    CHECK(same_shape(oar_module_get(m, "weight"), (int64_t[]){8, 3, 3, 3}, 4));
    CHECK(same_shape(oar_module_get(m, "bias"), (int64_t[]){8}, 1));
    CHECK(!strcmp(fmt(m), "Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))"));
    CHECK(same_shape(oar_forward(m, oar_randn((int64_t[]){2, 3, 6, 5}, 4, OAR_F32)), (int64_t[]){2, 8, 6, 5}, 4));
    /* unbatched input, as torch accepts */
    CHECK(same_shape(oar_forward(m, oar_randn((int64_t[]){3, 6, 5}, 3, OAR_F32)), (int64_t[]){8, 6, 5}, 3));
    CHECK_ERR(oar_forward(m, oar_randn((int64_t[]){2, 4, 8, 8}, 4, OAR_F32)),
              "Conv2d: expected an input of shape [N, C, H, W] or [C, H, W] (in_channels = 3), got [2, 4, 8, 8]");
    CHECK_ERR(oar_forward(m, oar_randn((int64_t[]){8, 8}, 2, OAR_F32)), "Conv2d: expected an input of shape");
    oar_module_free(m);

    /* fan_in = in/groups * k * k = 2 * 25 */
    m = oar_nn_conv2d(4, 64, 5, &(oar_conv_opts){.groups = 2}, true);
    check_uniform(oar_module_get(m, "weight"), 1 / sqrt(50.0));
    check_uniform(oar_module_get(m, "bias"), 1 / sqrt(50.0));
    CHECK(same_shape(oar_module_get(m, "weight"), (int64_t[]){64, 2, 5, 5}, 4));
    oar_module_free(m);

    /* transposed: weight [in, out/groups, k, k], so torch's fan_in is out/groups * k * k */
    m = oar_nn_conv_transpose2d(40, 6, 4, &(oar_conv_opts){.stride = {2, 2}, .output_padding = {1, 1}, .groups = 2},
                                false);
    CHECK(same_shape(oar_module_get(m, "weight"), (int64_t[]){40, 3, 4, 4}, 4));
    CHECK(oar_module_num_parameters(m) == 1);
    check_uniform(oar_module_get(m, "weight"), 1 / sqrt(48.0));
    CHECK(!strcmp(fmt(m), "ConvTranspose2d(40, 6, kernel_size=(4, 4), stride=(2, 2), output_padding=(1, 1), "
                          "groups=2, bias=false)"));
    CHECK(same_shape(oar_forward(m, oar_randn((int64_t[]){1, 40, 3, 3}, 4, OAR_F32)), (int64_t[]){1, 6, 9, 9}, 4));
    oar_module_free(m);

    m = oar_nn_conv1d(2, 4, 3, &(oar_conv_opts){.dilation = {2}}, true);
    CHECK(same_shape(oar_module_get(m, "weight"), (int64_t[]){4, 2, 3}, 3));
    CHECK(!strcmp(fmt(m), "Conv1d(2, 4, kernel_size=(3,), stride=(1,), dilation=(2,))"));
    CHECK(same_shape(oar_forward(m, oar_randn((int64_t[]){5, 2, 10}, 3, OAR_F32)), (int64_t[]){5, 4, 6}, 3));
    CHECK(same_shape(oar_forward(m, oar_randn((int64_t[]){2, 10}, 2, OAR_F32)), (int64_t[]){4, 6}, 2));
    CHECK_ERR(oar_forward(m, oar_randn((int64_t[]){5, 3, 10}, 3, OAR_F32)),
              "Conv1d: expected an input of shape [N, C, L] or [C, L] (in_channels = 2), got [5, 3, 10]");
    oar_module_free(m);

    CHECK_ERR(oar_nn_conv2d(3, 8, 3, &(oar_conv_opts){.groups = 2}, true),
              "Conv2d: expected in_channels (3) and out_channels (8) divisible by groups (2)");
    CHECK_ERR(oar_nn_conv2d(3, 8, 0, NULL, true), "Conv2d: expected in_channels, out_channels and kernel_size >= 1");
    CHECK_ERR(oar_nn_conv2d(3, 8, 3, &(oar_conv_opts){.padding = {-1, 0}}, true), "Conv2d: expected stride, padding");
    CHECK_ERR(oar_nn_conv2d(3, 8, 3, &(oar_conv_opts){.output_padding = {1, 0}}, true),
              "Conv2d: output_padding applies to transposed convolutions only");
    CHECK_ERR(oar_nn_conv_transpose2d(3, 8, 3, &(oar_conv_opts){.output_padding = {1, 1}}, true),
              "ConvTranspose2d: expected output_padding smaller than stride or dilation");
}

static void test_batch_norm(void) {
    oar_module *m = oar_nn_batch_norm2d(3, 1e-5, 0.1, true, true);
    const char *name;
    CHECK(oar_module_num_parameters(m) == 2 && oar_module_num_buffers(m) == 3);
    CHECK(oar_module_buffer(m, 0, &name) && !strcmp(name, "running_mean"));
    CHECK(oar_module_buffer(m, 1, &name) && !strcmp(name, "running_var"));
    oar_tensor *nbt = oar_module_buffer(m, 2, &name);
    CHECK(nbt && !strcmp(name, "num_batches_tracked") && oar_dtype_of(nbt) == OAR_I64 && oar_ndim(nbt) == 0);
    oar_tensor *rm = oar_module_get(m, "running_mean"), *rv = oar_module_get(m, "running_var");
    CHECK(t_at(oar_module_get(m, "weight"), 2) == 1 && t_at(oar_module_get(m, "bias"), 2) == 0);
    CHECK(t_at(rm, 1) == 0 && t_at(rv, 1) == 1 && !oar_requires_grad(rm));
    CHECK(!strcmp(fmt(m), "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)"));

    /* training: batch statistics, running ones move by momentum, the counter by one */
    oar_tensor *x = oar_add_scalar(oar_mul_scalar(oar_randn((int64_t[]){4, 3, 5, 5}, 4, OAR_F32), 2.0), 3.0);
    oar_tensor *y = oar_forward(m, x);
    double mean, var;
    oar_tensor *y0 = oar_slice(y, 1, 0, 1, 1);
    t_moments(y0, &mean, &var);
    CHECK_NEAR(mean, 0, 1e-5);
    CHECK_NEAR(var, 1, 1e-3);
    double m0, v0;
    t_moments(oar_slice(x, 1, 0, 1, 1), &m0, &v0);
    CHECK_NEAR(t_at(rm, 0), 0.1 * m0, 1e-5);
    CHECK_NEAR(t_at(rv, 0), 0.9 + 0.1 * v0 * 100 / 99, 1e-4); /* unbiased variance, n = 100 */
    CHECK(t_at(nbt, 0) == 1);

    /* evaluation: running statistics, nothing updated */
    oar_module_train(m, false);
    double rm0 = t_at(rm, 0), rv0 = t_at(rv, 0);
    y = oar_forward(m, x);
    CHECK(t_at(rm, 0) == rm0 && t_at(rv, 0) == rv0 && t_at(nbt, 0) == 1);
    CHECK_NEAR(t_at(y, 0), (t_at(x, 0) - rm0) / sqrt(rv0 + 1e-5), 1e-4);
    oar_module_train(m, true);
    CHECK_ERR(oar_forward(m, oar_randn((int64_t[]){4, 2, 5, 5}, 4, OAR_F32)),
              "BatchNorm2d: expected an input of shape [N, 3, H, W] (num_features = 3), got [4, 2, 5, 5]");
    CHECK_ERR(oar_forward(m, oar_randn((int64_t[]){4, 3}, 2, OAR_F32)), "BatchNorm2d: expected an input of shape");
    CHECK(t_at(nbt, 0) == 1); /* failed calls count nothing */
    oar_module_free(m);

    /* momentum < 0: torch's momentum=None, the running mean is the plain average of batch means */
    m = oar_nn_batch_norm1d(2, 1e-5, -1, true, true);
    CHECK(!strcmp(fmt(m), "BatchNorm1d(2, eps=1e-05, momentum=None, affine=true, track_running_stats=true)"));
    oar_tensor *a = oar_randn((int64_t[]){6, 2}, 2, OAR_F32), *b = oar_randn((int64_t[]){6, 2, 3}, 3, OAR_F32);
    CHECK(oar_forward(m, a) && oar_forward(m, b));
    double ma, mb, va, vb;
    t_moments(oar_slice(a, 1, 0, 1, 1), &ma, &va);
    t_moments(oar_slice(b, 1, 0, 1, 1), &mb, &vb);
    CHECK_NEAR(t_at(oar_module_get(m, "running_mean"), 0), (ma + mb) / 2, 1e-5);
    CHECK(t_at(oar_module_get(m, "num_batches_tracked"), 0) == 2);
    CHECK_ERR(oar_forward(m, oar_randn((int64_t[]){6, 3}, 2, OAR_F32)),
              "BatchNorm1d: expected an input of shape [N, 2] or [N, 2, L] (num_features = 2), got [6, 3]");
    oar_module_free(m);

    /* affine = false: no parameters; track = false: no buffers, batch statistics even in eval */
    m = oar_nn_batch_norm2d(3, 1e-3, 0.1, false, false);
    CHECK(oar_module_num_parameters(m) == 0 && oar_module_num_buffers(m) == 0);
    oar_module_train(m, false);
    y = oar_forward(m, x);
    t_moments(oar_slice(y, 1, 2, 3, 1), &mean, &var);
    CHECK_NEAR(mean, 0, 1e-5);
    oar_module_free(m);

    CHECK_ERR(oar_nn_batch_norm2d(0, 1e-5, 0.1, true, true), "BatchNorm2d: expected num_features >= 1");
    CHECK_ERR(oar_nn_batch_norm2d(3, 1e-5, 1.5, true, true), "momentum in [0, 1]");
}

static void test_other_norms(void) {
    oar_module *m = oar_nn_layer_norm((int64_t[]){2, 3}, 2, 1e-5, true);
    CHECK(same_shape(oar_module_get(m, "weight"), (int64_t[]){2, 3}, 2) && t_at(oar_module_get(m, "weight"), 5) == 1);
    CHECK(!strcmp(fmt(m), "LayerNorm((2, 3), eps=1e-05, elementwise_affine=true)"));
    oar_tensor *y = oar_forward(m, oar_randn((int64_t[]){4, 2, 3}, 3, OAR_F32));
    double mean, var;
    t_moments(oar_slice(y, 0, 1, 2, 1), &mean, &var);
    CHECK_NEAR(mean, 0, 1e-5);
    CHECK_NEAR(var, 1, 1e-3);
    CHECK_ERR(oar_forward(m, oar_randn((int64_t[]){4, 3, 2}, 3, OAR_F32)),
              "LayerNorm: expected an input whose last dims are [2, 3] (normalized_shape), got [4, 3, 2]");
    oar_module_free(m);
    m = oar_nn_layer_norm((int64_t[]){8}, 1, 1e-6, false);
    CHECK(oar_module_num_parameters(m) == 0 && !strcmp(fmt(m), "LayerNorm((8,), eps=1e-06, elementwise_affine=false)"));
    oar_module_free(m);
    CHECK_ERR(oar_nn_layer_norm(NULL, 0, 1e-5, true), "LayerNorm: expected a normalized_shape of 1 to");

    m = oar_nn_group_norm(2, 4, 1e-5, true);
    CHECK(oar_module_count_elements(m, false) == 8);
    CHECK(!strcmp(fmt(m), "GroupNorm(2, 4, eps=1e-05, affine=true)"));
    CHECK(same_shape(oar_forward(m, oar_randn((int64_t[]){3, 4, 5}, 3, OAR_F32)), (int64_t[]){3, 4, 5}, 3));
    CHECK_ERR(oar_forward(m, oar_randn((int64_t[]){3, 6, 5}, 3, OAR_F32)),
              "GroupNorm: expected an input of shape [N, 4, ...] (num_channels = 4), got [3, 6, 5]");
    oar_module_free(m);
    CHECK_ERR(oar_nn_group_norm(4, 6, 1e-5, true), "GroupNorm: expected num_groups >= 1 dividing num_channels, got 4 "
                                                   "groups for 6 channels");
}

static void test_dropout_embedding(void) {
    oar_module *m = oar_nn_dropout(0.25);
    CHECK(!strcmp(fmt(m), "Dropout(p=0.25)") && oar_module_num_parameters(m) == 0);
    oar_tensor *x = oar_add_scalar(oar_rand((int64_t[]){4000}, 1, OAR_F32), 1.0);
    oar_set_requires_grad(x, true);
    oar_tensor *y = oar_forward(m, x);
    int zeros = 0, scaled = 0;
    double *yv = t_values(y), *xv = t_values(x);
    for (int64_t i = 0; i < 4000; i++) {
        zeros += yv[i] == 0;
        scaled += fabs(yv[i] - xv[i] / 0.75) < 1e-6;
    }
    free(yv);
    free(xv);
    CHECK(zeros + scaled == 4000);
    CHECK(zeros > 900 && zeros < 1100); /* 1000 expected, sd ~27 */
    oar_module_train(m, false);
    CHECK(!oar_module_is_training(m));
    y = oar_forward(m, x);
    CHECK(y && y != x && t_at(y, 17) == t_at(x, 17) && t_at(y, 3999) == t_at(x, 3999));
    CHECK(oar_backward(oar_sum(y, NULL, 0, false), NULL, false) == OAR_OK && t_at(oar_grad_get(x), 5) == 1);
    oar_module_free(m);
    CHECK_ERR(oar_nn_dropout(1.5), "Dropout: expected a probability p in [0, 1], got 1.5");

    m = oar_nn_embedding(1000, 20);
    CHECK(!strcmp(fmt(m), "Embedding(1000, 20)"));
    double mean, var;
    t_moments(oar_module_get(m, "weight"), &mean, &var); /* torch: N(0, 1) */
    CHECK_NEAR(mean, 0, 0.02);
    CHECK_NEAR(var, 1, 0.05);
    int64_t idx[3] = {5, 999, 5};
    y = oar_forward(m, oar_from_data(idx, (int64_t[]){3}, 1, OAR_I64));
    CHECK(same_shape(y, (int64_t[]){3, 20}, 2) && t_at(y, 0) == t_at(y, 40));
    CHECK(t_at(y, 20) == t_at(oar_module_get(m, "weight"), 999 * 20));
    CHECK_ERR(oar_forward(m, oar_zeros((int64_t[]){3}, 1, OAR_F32)), "Embedding: expected integer indices");
    int64_t bad = 1000;
    CHECK_ERR(oar_forward(m, oar_from_data(&bad, (int64_t[]){1}, 1, OAR_I64)), "index 1000 is out of range");
    oar_module_free(m);
}

static void test_pool_flatten_act(void) {
    oar_module *m = oar_nn_max_pool2d(&(oar_pool_opts){.kernel = {2, 2}});
    CHECK(!strcmp(fmt(m), "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=false)"));
    CHECK(same_shape(oar_forward(m, oar_randn((int64_t[]){2, 3, 7, 8}, 4, OAR_F32)), (int64_t[]){2, 3, 3, 4}, 4));
    oar_module_free(m);
    m = oar_nn_avg_pool2d(&(oar_pool_opts){.kernel = {3, 2}, .stride = {1, 2}, .padding = {1, 1}, .ceil_mode = true,
                                           .exclude_pad = true});
    CHECK(!strcmp(fmt(m), "AvgPool2d(kernel_size=(3, 2), stride=(1, 2), padding=1, ceil_mode=true, "
                          "count_include_pad=false)"));
    CHECK(same_shape(oar_forward(m, oar_randn((int64_t[]){3, 5, 5}, 3, OAR_F32)), (int64_t[]){3, 5, 3}, 3));
    oar_module_free(m);
    CHECK_ERR(oar_nn_max_pool2d(NULL), "MaxPool2d: expected options with the kernel size, got NULL");
    CHECK_ERR(oar_nn_max_pool2d(&(oar_pool_opts){.kernel = {2, 2}, .padding = {2, 0}}),
              "MaxPool2d: expected padding at most half the kernel size");
    CHECK_ERR(oar_nn_avg_pool2d(&(oar_pool_opts){.kernel = {2, 2}, .dilation = {2, 2}}), "AvgPool2d: expected dilation");

    m = oar_nn_adaptive_avg_pool2d(1, 3);
    CHECK(!strcmp(fmt(m), "AdaptiveAvgPool2d(output_size=(1, 3))"));
    CHECK(same_shape(oar_forward(m, oar_randn((int64_t[]){2, 3, 7, 8}, 4, OAR_F32)), (int64_t[]){2, 3, 1, 3}, 4));
    oar_module_free(m);
    CHECK_ERR(oar_nn_adaptive_avg_pool2d(0, 3), "AdaptiveAvgPool2d: expected an output size of at least 1x1");

    m = oar_nn_flatten(1, -1);
    CHECK(!strcmp(fmt(m), "Flatten(start_dim=1, end_dim=-1)"));
    CHECK(same_shape(oar_forward(m, oar_randn((int64_t[]){2, 3, 4, 5}, 4, OAR_F32)), (int64_t[]){2, 60}, 2));
    oar_module_free(m);

    struct { oar_activation kind; double param; const char *printed; double at_minus1; } acts[] = {
        {OAR_ACT_RELU, 0, "ReLU()", 0},
        {OAR_ACT_LEAKY_RELU, 0, "LeakyReLU(negative_slope=0.01)", -0.01},
        {OAR_ACT_LEAKY_RELU, 0.2, "LeakyReLU(negative_slope=0.2)", -0.2},
        {OAR_ACT_ELU, 0, "ELU(alpha=1.0)", exp(-1.0) - 1},
        {OAR_ACT_ELU, 2, "ELU(alpha=2.0)", 2 * (exp(-1.0) - 1)},
        {OAR_ACT_GELU, 0, "GELU(approximate='none')", -0.15865525393145707},
        {OAR_ACT_GELU_TANH, 0, "GELU(approximate='tanh')", -0.15880800939172324},
        {OAR_ACT_SILU, 0, "SiLU()", -1 / (1 + exp(1.0))},
        {OAR_ACT_TANH, 0, "Tanh()", tanh(-1.0)},
        {OAR_ACT_SIGMOID, 0, "Sigmoid()", 1 / (1 + exp(1.0))},
        {OAR_ACT_SOFTPLUS, 0, "Softplus(beta=1.0, threshold=20)", log1p(exp(-1.0))},
        {OAR_ACT_SOFTPLUS, 2, "Softplus(beta=2.0, threshold=20)", log1p(exp(-2.0)) / 2},
        {OAR_ACT_IDENTITY, 0, "Identity()", -1},
    };
    oar_tensor *x = oar_full((int64_t[]){2}, 1, -1.0, OAR_F32);
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        m = oar_nn_activation(acts[i].kind, acts[i].param);
        CHECK(!strcmp(fmt(m), acts[i].printed));
        oar_tensor *y = oar_forward(m, x);
        CHECK(y && y != x);
        CHECK_NEAR(t_at(y, 1), acts[i].at_minus1, 1e-6);
        oar_module_free(m);
    }
    CHECK_ERR(oar_nn_activation((oar_activation)42, 0), "Activation: expected a kind from oar_activation");
    CHECK_ERR(oar_nn_activation(OAR_ACT_ELU, NAN), "ELU: expected a finite alpha");
}

/* A LeNet-5 for 28x28 images: counts, names, forward, freezing, printing and errors. */
static oar_module *lenet(void) {
    oar_pool_opts pool = {.kernel = {2, 2}};
    return oar_nn_sequential((oar_module *[]){oar_nn_conv2d(1, 6, 5, NULL, true), oar_nn_activation(OAR_ACT_RELU, 0),
                                              oar_nn_max_pool2d(&pool), oar_nn_conv2d(6, 16, 5, NULL, true),
                                              oar_nn_activation(OAR_ACT_RELU, 0), oar_nn_max_pool2d(&pool),
                                              oar_nn_flatten(1, -1), oar_nn_linear(256, 120, true),
                                              oar_nn_activation(OAR_ACT_RELU, 0), oar_nn_linear(120, 84, true),
                                              oar_nn_activation(OAR_ACT_RELU, 0), oar_nn_linear(84, 10, true)},
                             12);
}

static void test_sequential(void) {
    oar_module *net = lenet();
    CHECK(net != NULL);
    /* (6*25 + 6) + (16*6*25 + 16) + (256*120 + 120) + (120*84 + 84) + (84*10 + 10) */
    CHECK(oar_module_count_elements(net, false) == 44426);
    CHECK(oar_module_num_parameters(net) == 10);
    const char *name;
    oar_module_parameter(net, 2, &name);
    CHECK(!strcmp(name, "3.weight"));
    CHECK(oar_module_get(net, "11.bias") && !strcmp(oar_module_type(oar_module_child(net, "6")), "Flatten"));
    oar_tensor *x = oar_randn((int64_t[]){2, 1, 28, 28}, 4, OAR_F32);
    oar_tensor *y = oar_forward(net, x);
    CHECK(same_shape(y, (int64_t[]){2, 10}, 2));

    /* freezing the first conv: fewer trainable elements, no gradient for it */
    CHECK(oar_module_set_requires_grad(net, "0.", false) == OAR_OK);
    CHECK(oar_module_count_elements(net, true) == 44426 - 156);
    y = oar_forward(net, x);
    CHECK(oar_backward(oar_sum(y, NULL, 0, false), NULL, false) == OAR_OK);
    CHECK(oar_grad_get(oar_module_get(net, "0.weight")) == NULL);
    CHECK(oar_grad_get(oar_module_get(net, "3.weight")) != NULL);
    CHECK(oar_grad_get(oar_module_get(net, "11.bias")) != NULL);
    CHECK(oar_module_set_requires_grad(net, "", true) == OAR_OK && oar_module_count_elements(net, true) == 44426);
    CHECK_ERR(oar_module_set_requires_grad(net, "12.", false), "no parameter path starts with '12.'");

    /* errors name the child that failed */
    CHECK_ERR(oar_forward(net, oar_randn((int64_t[]){2, 3, 28, 28}, 4, OAR_F32)),
              "Sequential (0): Conv2d: expected an input of shape [N, C, H, W] or [C, H, W] (in_channels = 1)");
    CHECK_ERR(oar_forward(net, oar_randn((int64_t[]){2, 1, 32, 32}, 4, OAR_F32)),
              "Sequential (7): Linear: expected an input of shape [..., 256] (in_features = 256), got [2, 400]");
    oar_module_free(net);

    /* train/eval reaches every child; printing nests like torch */
    net = oar_nn_sequential((oar_module *[]){oar_nn_linear(4, 8, true), oar_nn_dropout(0.5)}, 2);
    CHECK(oar_nn_sequential_append(net, oar_nn_sequential((oar_module *[]){oar_nn_activation(OAR_ACT_TANH, 0)}, 1))
          == OAR_OK);
    oar_module_train(net, false);
    CHECK(!oar_module_is_training(oar_module_child(net, "1")) && !oar_module_is_training(oar_module_child(net, "2.0")));
    CHECK(!strcmp(fmt(net), "Sequential(\n"
                            "  (0): Linear(in_features=4, out_features=8, bias=true)\n"
                            "  (1): Dropout(p=0.5)\n"
                            "  (2): Sequential(\n"
                            "    (0): Tanh()\n"
                            "  )\n"
                            ")"));
    oar_tensor *in = oar_randn((int64_t[]){3, 4}, 2, OAR_F32);
    oar_tensor *a = oar_forward(net, in), *b = oar_forward(net, in);
    CHECK(a && b && t_at(a, 7) == t_at(b, 7)); /* eval: deterministic */
    oar_module_free(net);

    /* an empty Sequential is the identity */
    net = oar_nn_sequential(NULL, 0);
    CHECK(!strcmp(fmt(net), "Sequential()"));
    y = oar_forward(net, in);
    CHECK(y && y != in && t_at(y, 5) == t_at(in, 5));
    oar_module_free(net);

    /* ownership: a failed child frees everything handed over (LeakSanitizer checks) */
    oar_clear_error();
    net = oar_nn_sequential((oar_module *[]){oar_nn_linear(4, 8, true), oar_nn_dropout(2.0), oar_nn_linear(8, 2, true)},
                            3);
    CHECK(net == NULL && strstr(oar_last_error(), "Dropout: expected a probability") != NULL);
    oar_module *lin = oar_nn_linear(2, 2, true);
    CHECK_ERR(oar_nn_sequential_append(lin, oar_nn_linear(2, 2, true)), "Sequential: expected a Sequential to append to, got Linear");
    net = oar_nn_sequential(&lin, 1);
    CHECK_ERR(oar_nn_sequential_append(net, lin), "already has a parent");
    CHECK_ERR(oar_nn_sequential_append(net, NULL), "Sequential: expected a module, got NULL");
    CHECK(oar_module_num_parameters(net) == 2);
    oar_module_free(net);
    CHECK_ERR(oar_nn_sequential(NULL, 2), "Sequential: expected n >= 0 children in an array");
}

int main(void) {
    oar_scope_begin();
    oar_manual_seed(7);
    test_linear();
    test_conv();
    test_batch_norm();
    test_other_norms();
    test_dropout_embedding();
    test_pool_flatten_act();
    test_sequential();
    oar_scope_end();
    return test_summary("test_layers");
}
