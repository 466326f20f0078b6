/* CPU nn kernels: softmax family (nn_softmax.c), normalizations (nn_norm.c), dropout
 * (nn_dropout.c). */
#include "kernels/cpu/nn_kernels.h"

void oar_cpu_register_nn(void) {
    oar_cpu_nn_register_softmax();
    oar_cpu_nn_register_norm();
    oar_cpu_nn_register_dropout();
}
