/* Registration of the vectorized nn kernels, one function per file (cpu_nn.c calls them). */
#ifndef OAR_NN_KERNELS_H
#define OAR_NN_KERNELS_H

#include "kernels/cpu/cpu_kernels.h"

void oar_cpu_nn_register_softmax(void); /* nn_softmax.c */
void oar_cpu_nn_register_norm(void);    /* nn_norm.c */
void oar_cpu_nn_register_dropout(void); /* nn_dropout.c */

#endif
