/* `oar quantize --method qat`: the quantization-aware fine-tune of a prepared model (quantize_qat.c). */
#ifndef OAR_QUANTIZE_QAT_H
#define OAR_QUANTIZE_QAT_H

#include "train.h"

/* Trains m (prepared with oar_qat_prepare) for epochs over d's training set, at most
 * o->steps_limit steps when given: SGD, momentum 0.9, cosine from lr, o's batch, label smoothing
 * and --mode (eager or static). lsq: after a tenth of the steps the input scales become learnable
 * (oar_qat_learn_scales). freeze_bn > 0: after that many steps the fused BatchNorms' statistics are
 * frozen (oar_qat_freeze_bn; a compiled step is traced again). *steps_done gets the steps run. */
oar_status quantize_qat_train(oar_module *m, const train_data *d, const train_opts *o, int epochs, double lr, bool lsq,
                              int64_t freeze_bn, int64_t *steps_done);

#endif
