/* The zoo's table: model names, what they take, and their constructors. */
#include "zoo.h"

#include <string.h>

typedef struct zoo_entry {
    oar_zoo_info info;
    oar_module *(*create)(const oar_zoo_opts *o);
} zoo_entry;

/* Shapes and defaults follow the reference workloads in ../shared/bench/torch_workloads.py. */
static const zoo_entry ZOO[] = {
    {{"tiny", "MLP 64-64-64-10, ReLU", OAR_ZOO_FEATURES, 64, 10, 0}, oar_zoo_tiny},
    {{"mlp", "MLP 784-512-512-10, ReLU", OAR_ZOO_IMAGE, 1, 10, 0}, oar_zoo_mlp},
    {{"lenet", "LeNet-5: two 5x5 convs with max pooling, three linear layers", OAR_ZOO_IMAGE, 1, 10, 0}, oar_zoo_lenet},
    {{"resnet20", "CIFAR ResNet-20 (16/32/64 channels, batch norm, 1x1 projection shortcuts)", OAR_ZOO_IMAGE, 3, 10, 0},
     oar_zoo_resnet20},
    {{"mobilenet", "MobileNet-style: depthwise-separable 3x3 blocks with batch norm", OAR_ZOO_IMAGE, 1, 10, 0},
     oar_zoo_mobilenet},
    {{"gpt-mini", "decoder: 4 layers, 4 heads, d 256, context 128, byte vocabulary, tied embedding", OAR_ZOO_TOKENS,
      0, 256, 128},
     oar_zoo_gpt_mini},
    {{"lstm-lm", "Embedding(10000, 200), 2-layer LSTM(200), Linear(200, 10000)", OAR_ZOO_TOKENS_STATEFUL, 0, 10000, 35},
     oar_zoo_lstm_lm},
};
#define N_ZOO ((int)(sizeof ZOO / sizeof ZOO[0]))

const oar_zoo_info *oar_zoo_info_at(int i) { return i >= 0 && i < N_ZOO ? &ZOO[i].info : NULL; }

const oar_zoo_info *oar_zoo_find(const char *name) {
    for (int i = 0; name && i < N_ZOO; i++)
        if (!strcmp(ZOO[i].info.name, name)) return &ZOO[i].info;
    return NULL;
}

oar_module *oar_zoo_create(const char *name, const oar_zoo_opts *opts) {
    for (int i = 0; name && i < N_ZOO; i++)
        if (!strcmp(ZOO[i].info.name, name)) return ZOO[i].create(opts);
    char known[256] = "";
    for (int i = 0; i < N_ZOO; i++) {
        strcat(known, i ? ", " : "");
        strcat(known, ZOO[i].info.name);
    }
    oar_set_error(OAR_ERR_INVALID_ARG, "zoo: no model named '%s'; expected one of %s", name ? name : "(null)", known);
    return NULL;
}

oar_module *oar_zoo_checked(oar_module *m, bool ok) {
    if (ok) return m;
    oar_module_free(m);
    return NULL;
}
