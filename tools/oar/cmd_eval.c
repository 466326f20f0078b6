/* `oar eval`: loads a checkpoint into its zoo model and reports test loss and accuracy. */
#include "cli.h"
#include "train.h"

#include <stdio.h>

int oar_cmd_eval(int argc, char **argv) {
    train_opts o;
    if (!train_parse(argc, argv, &o)) return 2;
    if (o.threads && oar_set_num_threads(o.threads) != OAR_OK) {
        fprintf(stderr, "oar eval: %s\n", oar_last_error());
        return 2;
    }
    char ckpt[512];
    snprintf(ckpt, sizeof ckpt, "%s", o.checkpoint ? o.checkpoint : "");
    if (!*ckpt) snprintf(ckpt, sizeof ckpt, "oar-%s.safetensors", o.model);
    train_data d;
    oar_module *m = NULL;
    int64_t step = 0;
    double loss = 0, acc = 0;
    int rc = 1;
    if (train_data_open(&o, &d) == OAR_OK && (m = train_model_create(&o, &d)) &&
        oar_checkpoint_load(ckpt, m, NULL, &step) == OAR_OK &&
        train_evaluate(m, &d, d.test, o.batch, &loss, &acc) == OAR_OK) {
        printf("{\"model\": \"%s\", \"checkpoint\": \"%s\", \"step\": %lld, \"test_loss\": %.6f, "
               "\"test_accuracy\": %.6f}\n", o.model, ckpt, (long long)step, loss, acc);
        rc = 0;
    } else {
        fprintf(stderr, "oar eval: %s\n", oar_last_error());
    }
    oar_module_free(m);
    train_data_close(&d);
    return rc;
}
