/* CIFAR ResNet-20: a 3x3 stem, three stages of three basic blocks (16, 32, 64 channels;
 * stride 2 into stages two and three, with 1x1 projection shortcuts), global average pool
 * and a linear classifier. Names follow the reference workload. */
#include "zoo.h"
#include "zoo_util.h"

#include <stdio.h>

/* kids: conv1, bn1, conv2, bn2, and (projection) short */
static oar_status block_forward(oar_module *self, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    zoo_kids *s = oar_module_state(self);
    oar_scope_begin();
    oar_tensor *x = in[0];
    oar_tensor *y = oar_relu(zoo_run(s->k[1], zoo_run(s->k[0], x)));
    y = zoo_run(s->k[3], zoo_run(s->k[2], y));
    oar_tensor *sc = s->n > 4 ? zoo_run(s->k[4], x) : x;
    return zoo_finish(out, oar_relu(oar_add(y, sc)));
}

static const oar_module_ops BLOCK_OPS = {"BasicBlock", block_forward, free, NULL};

static oar_module *conv_bn(int64_t cin, int64_t cout, int64_t k, int64_t stride, int64_t pad, oar_module **bn) {
    oar_conv_opts c = {.stride = {stride, stride}, .padding = {pad, pad}};
    *bn = oar_nn_batch_norm2d(cout, 1e-5, 0.1, true, true);
    return oar_nn_conv2d(cin, cout, k, &c, false);
}

static oar_module *basic_block(int64_t cin, int64_t cout, int64_t stride) {
    zoo_kids *s;
    oar_module *m = zoo_new(&BLOCK_OPS, &s), *bn;
    bool ok = m != NULL;
    oar_module *conv = conv_bn(cin, cout, 3, stride, 1, &bn);
    zoo_add(m, s, "conv1", conv, &ok);
    zoo_add(m, s, "bn1", bn, &ok);
    conv = conv_bn(cout, cout, 3, 1, 1, &bn);
    zoo_add(m, s, "conv2", conv, &ok);
    zoo_add(m, s, "bn2", bn, &ok);
    if (stride != 1 || cin != cout) {
        oar_module *pbn, *pconv = conv_bn(cin, cout, 1, stride, 0, &pbn);
        oar_module *pair[2] = {pconv, pbn};
        zoo_add(m, s, "short", oar_nn_sequential(pair, 2), &ok);
    }
    return oar_zoo_checked(m, ok);
}

/* kids: conv, bn, layers, fc */
static oar_status resnet_forward(oar_module *self, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    zoo_kids *s = oar_module_state(self);
    oar_scope_begin();
    oar_tensor *x = oar_relu(zoo_run(s->k[1], zoo_run(s->k[0], in[0])));
    x = zoo_run(s->k[2], x);
    x = oar_flatten(oar_adaptive_avg_pool2d(x, 1, 1), 1, -1);
    return zoo_finish(out, zoo_run(s->k[3], x));
}

static const oar_module_ops RESNET_OPS = {"ResNet20", resnet_forward, free, NULL};

oar_module *oar_zoo_resnet20(const oar_zoo_opts *o) {
    int64_t cin = o && o->in_channels ? o->in_channels : 3, classes = o && o->num_classes ? o->num_classes : 10;
    zoo_kids *s;
    oar_module *m = zoo_new(&RESNET_OPS, &s), *bn;
    bool ok = m != NULL;
    oar_module *conv = conv_bn(cin, 16, 3, 1, 1, &bn);
    zoo_add(m, s, "conv", conv, &ok);
    zoo_add(m, s, "bn", bn, &ok);
    oar_module *layers = oar_nn_sequential(NULL, 0);
    static const int64_t widths[3] = {16, 32, 64};
    int64_t c = 16;
    for (int stage = 0; stage < 3; stage++)
        for (int i = 0; i < 3; i++) {
            oar_module *b = basic_block(c, widths[stage], stage > 0 && i == 0 ? 2 : 1);
            if (!b || !layers || oar_nn_sequential_append(layers, b) != OAR_OK) {
                if (b && layers) oar_module_free(b);
                ok = false;
            }
            c = widths[stage];
        }
    zoo_add(m, s, "layers", layers, &ok);
    zoo_add(m, s, "fc", oar_nn_linear(64, classes, true), &ok);
    return oar_zoo_checked(m, ok);
}
