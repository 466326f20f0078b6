/* Helpers shared by the built-in layers (layers*.c, sequential.c): creating a layer with its
 * configuration, registering parameters and buffers, torch's default initialization, the
 * checks every forward makes, and torch-like printing of numbers and shapes. */
#ifndef OAR_LAYERS_UTIL_H
#define OAR_LAYERS_UTIL_H

#include "nn/module.h"

/* A module of the given type owning a copy of cfg (size bytes, freed with the module). */
oar_module *oar_layer_new(const oar_module_ops *ops, const void *cfg, size_t size);

/* A zero-filled tensor of dtype dt registered under name as a parameter (param = true) or a
 * buffer. Returns it borrowed from the module, or NULL with the error set. */
oar_tensor *oar_layer_tensor(oar_module *m, const char *name, const int64_t *shape, int ndim, oar_dtype dt,
                             bool param);

/* torch's reset_parameters for Linear and convolutions: kaiming_uniform_(a = sqrt(5)) on the
 * weight, which is U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the same bound on the bias (may be
 * NULL). fan_in comes from the weight's shape, so transposed convolutions use out/groups * k. */
oar_status oar_layer_init_fan_in(oar_tensor *weight, oar_tensor *bias);

/* forward's common checks: exactly one input and one output, and the input not NULL (an
 * earlier error is kept, like operators do). */
oar_status oar_layer_check_io(const oar_module *m, oar_tensor *const *in, int n_in, int n_out);
/* The input's dtype must be the parameters' (p may be NULL: nothing to check). */
oar_status oar_layer_check_dtype(const oar_module *m, const oar_tensor *x, const oar_tensor *p);

/* A tensor's shape as "[2, 3, 4]" into buf. */
const char *oar_layer_shape_str(const oar_tensor *t, char *buf, size_t size);
/* A double written the way Python's repr writes a float ("0.1", "1.0", "1e-05"), so that
 * printed layers read like torch's. Returns buf. */
const char *oar_layer_pyfloat(double v, char *buf, size_t size);
/* "true" / "false". */
const char *oar_layer_bool(bool b);

/* Writes the output of a layer whose result is its input unchanged: a new view (a distinct
 * handle, so the caller may release it without touching x), differentiable. */
oar_tensor *oar_layer_identity(oar_tensor *x);

/* Conv2d's resolved options; NULL for other modules (layers_conv.c). */
const oar_conv_opts *oar_layer_conv2d_opts(const oar_module *m);

/* BatchNorm2d's features and eps when m is one that tracks running statistics (what a conv-BN
 * fold needs); false for other modules (layers_norm.c). */
bool oar_layer_batch_norm2d_cfg(const oar_module *m, int64_t *features, double *eps);

#endif
