/* oneDNN kernels (f32) for conv2d, conv2d_grad_input and conv2d_grad_weight. */
#ifndef OAR_CONV_DNNL_H
#define OAR_CONV_DNNL_H

/* Registers them above the im2col kernels; does nothing in a build without oneDNN. */
void oar_cpu_conv_register_dnnl(void);

#endif
