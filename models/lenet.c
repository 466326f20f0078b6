/* LeNet-5 for 28x28 inputs: conv(1->6, 5, pad 2)-relu-pool2, conv(6->16, 5)-relu-pool2,
 * fc 400-120-84-10. Names follow the reference workload (c1, c2, f1, f2, f3). */
#include "zoo.h"
#include "zoo_util.h"

static oar_status lenet_forward(oar_module *self, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    zoo_kids *s = oar_module_state(self);
    oar_pool_opts pool = {.kernel = {2, 2}};
    oar_scope_begin();
    oar_tensor *x = oar_max_pool2d(oar_relu(zoo_run(s->k[0], in[0])), &pool);
    x = oar_max_pool2d(oar_relu(zoo_run(s->k[1], x)), &pool);
    x = oar_flatten(x, 1, -1);
    x = oar_relu(zoo_run(s->k[2], x));
    x = oar_relu(zoo_run(s->k[3], x));
    return zoo_finish(out, zoo_run(s->k[4], x));
}

static const oar_module_ops LENET_OPS = {"LeNet", lenet_forward, free, NULL};

oar_module *oar_zoo_lenet(const oar_zoo_opts *o) {
    int64_t cin = o && o->in_channels ? o->in_channels : 1, classes = o && o->num_classes ? o->num_classes : 10;
    zoo_kids *s;
    oar_module *m = zoo_new(&LENET_OPS, &s);
    bool ok = m != NULL;
    zoo_add(m, s, "c1", oar_nn_conv2d(cin, 6, 5, &(oar_conv_opts){.padding = {2, 2}}, true), &ok);
    zoo_add(m, s, "c2", oar_nn_conv2d(6, 16, 5, NULL, true), &ok);
    zoo_add(m, s, "f1", oar_nn_linear(400, 120, true), &ok);
    zoo_add(m, s, "f2", oar_nn_linear(120, 84, true), &ok);
    zoo_add(m, s, "f3", oar_nn_linear(84, classes, true), &ok);
    return oar_zoo_checked(m, ok);
}
