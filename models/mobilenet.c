/* A MobileNet-style network: a 3x3 stem, then depthwise-separable blocks (3x3 depthwise
 * conv with one filter per channel, then a 1x1 pointwise conv, each followed by batch norm
 * and ReLU), global average pooling and a linear classifier. Sized for 28x28 or 32x32. */
#include "zoo.h"
#include "zoo_util.h"

#include <stdio.h>

static const struct { int64_t cin, cout, stride; } BLOCKS[] = {
    {32, 64, 1}, {64, 128, 2}, {128, 128, 1}, {128, 256, 2}, {256, 256, 1},
};
#define N_BLOCKS ((int)(sizeof BLOCKS / sizeof BLOCKS[0]))

static oar_module *conv_bn_relu(int64_t cin, int64_t cout, int64_t k, int64_t stride, int64_t groups) {
    oar_conv_opts c = {.stride = {stride, stride}, .padding = {k / 2, k / 2}, .groups = groups};
    oar_module *kids[3] = {oar_nn_conv2d(cin, cout, k, &c, false), oar_nn_batch_norm2d(cout, 1e-5, 0.1, true, true),
                           oar_nn_activation(OAR_ACT_RELU, 0)};
    return oar_nn_sequential(kids, 3);
}

/* kids: stem, blocks (a Sequential), fc */
static oar_status mobilenet_forward(oar_module *self, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    zoo_kids *s = oar_module_state(self);
    oar_scope_begin();
    oar_tensor *x = zoo_run(s->k[1], zoo_run(s->k[0], in[0]));
    x = oar_flatten(oar_adaptive_avg_pool2d(x, 1, 1), 1, -1);
    return zoo_finish(out, zoo_run(s->k[2], x));
}

static const oar_module_ops MOBILENET_OPS = {"MobileNet", mobilenet_forward, free, NULL};

oar_module *oar_zoo_mobilenet(const oar_zoo_opts *o) {
    int64_t cin = o && o->in_channels ? o->in_channels : 1, classes = o && o->num_classes ? o->num_classes : 10;
    zoo_kids *s;
    oar_module *m = zoo_new(&MOBILENET_OPS, &s);
    bool ok = m != NULL;
    zoo_add(m, s, "stem", conv_bn_relu(cin, 32, 3, 1, 1), &ok);
    oar_module *blocks = oar_nn_sequential(NULL, 0);
    for (int i = 0; i < N_BLOCKS; i++) {
        oar_module *pair[2] = {conv_bn_relu(BLOCKS[i].cin, BLOCKS[i].cin, 3, BLOCKS[i].stride, BLOCKS[i].cin),
                               conv_bn_relu(BLOCKS[i].cin, BLOCKS[i].cout, 1, 1, 1)};
        oar_module *ds = oar_nn_sequential(pair, 2);
        if (!ds || !blocks || oar_nn_sequential_append(blocks, ds) != OAR_OK) {
            if (ds && blocks) oar_module_free(ds);
            ok = false;
        }
    }
    zoo_add(m, s, "blocks", blocks, &ok);
    zoo_add(m, s, "fc", oar_nn_linear(256, classes, true), &ok);
    return oar_zoo_checked(m, ok);
}
