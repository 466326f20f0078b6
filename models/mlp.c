/* tiny (64-64-64-10) and mlp (784-512-512-10): ReLU MLPs. mlp flattens image inputs. */
#include "zoo.h"
#include "zoo_util.h"

oar_module *oar_zoo_tiny(const oar_zoo_opts *o) {
    int64_t in = o && o->in_channels ? o->in_channels : 64, classes = o && o->num_classes ? o->num_classes : 10;
    oar_module *kids[5] = {oar_nn_linear(in, 64, true), oar_nn_activation(OAR_ACT_RELU, 0), oar_nn_linear(64, 64, true),
                           oar_nn_activation(OAR_ACT_RELU, 0), oar_nn_linear(64, classes, true)};
    return oar_nn_sequential(kids, 5); /* names 0..4, like torch's nn.Sequential */
}

static oar_status mlp_forward(oar_module *self, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    zoo_kids *s = oar_module_state(self);
    oar_scope_begin();
    oar_tensor *x = oar_flatten(in[0], 1, -1);
    x = oar_relu(zoo_run(s->k[0], x));
    x = oar_relu(zoo_run(s->k[1], x));
    return zoo_finish(out, zoo_run(s->k[2], x));
}

static const oar_module_ops MLP_OPS = {"MLP", mlp_forward, free, NULL};

oar_module *oar_zoo_mlp(const oar_zoo_opts *o) {
    int64_t in = o && o->in_channels ? o->in_channels * 784 : 784, classes = o && o->num_classes ? o->num_classes : 10;
    zoo_kids *s;
    oar_module *m = zoo_new(&MLP_OPS, &s);
    bool ok = m != NULL;
    zoo_add(m, s, "fc1", oar_nn_linear(in, 512, true), &ok);
    zoo_add(m, s, "fc2", oar_nn_linear(512, 512, true), &ok);
    zoo_add(m, s, "fc3", oar_nn_linear(512, classes, true), &ok);
    return oar_zoo_checked(m, ok);
}
