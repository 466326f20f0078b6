/* f32 pooling kernels (plain C loops the compiler vectorizes, threaded over planes). */
#ifndef OAR_CONV_POOL_H
#define OAR_CONV_POOL_H

/* Registers them; called from oar_cpu_register_conv. */
void oar_cpu_conv_register_pool(void);

#endif
