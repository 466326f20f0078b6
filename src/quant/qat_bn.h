/* ConvBn-fused quantization-aware training (qat_bn.c): the BatchNorm2d a prepared conv folds into
 * its fake-quantized weight, and freezing that BN's statistics. */
#ifndef OAR_QUANT_QAT_BN_H
#define OAR_QUANT_QAT_BN_H

#include "nn/module.h"

/* The BatchNorm2d (tracking running statistics, of conv's output channels) that directly follows
 * conv among its parent's children: the pair the export's fold_conv_bn will fold at convert, as
 * ResNet's conv1/bn1 and a Sequential's (conv, bn). NULL when there is none. */
oar_module *oar_qat_bn_after(oar_module *conv);

/* The fold factor gamma * rsqrt(running_var + eps) [C], computed as the fold_conv_bn pass does
 * (the same float ops), so the folded weight training sees is the one convert quantizes. */
oar_tensor *oar_qat_bn_factor(oar_module *bn);

/* From now on bn normalizes with its running statistics and no longer updates them, in training
 * mode too (torch's freeze_bn_stats). Its parameters, buffers and type name stay as they are. */
oar_status oar_qat_bn_freeze(oar_module *bn);
bool oar_qat_bn_is_frozen(const oar_module *bn);

#endif
