/* The model zoo: each model is a module built from the public API, like a user would. */
#ifndef OAR_ZOO_H
#define OAR_ZOO_H

#include "oar.h"

oar_module *oar_zoo_tiny(const oar_zoo_opts *o);
oar_module *oar_zoo_mlp(const oar_zoo_opts *o);
oar_module *oar_zoo_lenet(const oar_zoo_opts *o);
oar_module *oar_zoo_resnet20(const oar_zoo_opts *o);
oar_module *oar_zoo_mobilenet(const oar_zoo_opts *o);
oar_module *oar_zoo_gpt_mini(const oar_zoo_opts *o);
oar_module *oar_zoo_lstm_lm(const oar_zoo_opts *o);

/* Builds a module or, if any step failed (NULL), frees what was built and returns NULL. */
oar_module *oar_zoo_checked(oar_module *m, bool ok);

#endif
