/* `oar quantize --out` for the token models (lstm-lm, gpt-mini): the quantized module written as a
 * program that `oar infer` and the predictor run (quantize_tokens.c). */
#ifndef OAR_QUANTIZE_TOKENS_H
#define OAR_QUANTIZE_TOKENS_H

#include "train.h"

/* Exports m (a token model of d, eval mode) at path: input "tokens" i64 [N, T] (N dynamic, T the
 * test windows' length), output "logits" f32 [N, T, vocab]. lstm-lm's forward is sequence first
 * with a state: the program transposes the ids, starts from a zero state and transposes the
 * logits back, as training and evaluation run it. Then it runs the first test batch through the
 * predictor and through m in process: *max_diff gets the largest |difference| of the logits. */
oar_status quantize_tokens_export(oar_module *m, const train_data *d, int64_t batch, const char *path,
                                  double *max_diff);

#endif
