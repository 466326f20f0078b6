/* What the CTC loss ops (ctc.c) and their fast kernels (cpu_ctc.c) share: the batch's lengths
 * read and checked once, and each sample's extended target (a blank before, between and after
 * its labels). Both kernels check the data alike, so a bad length or label reads the same
 * whichever kernel runs. */
#ifndef OAR_CTC_H
#define OAR_CTC_H

#include "ops/op.h"

typedef struct oar_ctc_batch {
    int64_t T, N, C, blank;
    int64_t max_len;              /* the longest target: 2 max_len + 1 extended states at most */
    int64_t *in_len, *tg_len, *tg_off; /* per sample: frames, labels, first label's flat index */
    const char *tg;               /* the targets' data, read with ttr */
    const oar_dtype_traits *ttr;
} oar_ctc_batch;

/* Reads and checks the lengths and labels (contiguous inputs): input_lengths in [0, T],
 * target_lengths >= 0 and within the targets, labels in [0, C) other than the blank. op names
 * the caller in the messages. On success the caller frees b with oar_ctc_batch_free. */
oar_status oar_ctc_batch_init(const char *op, oar_ctc_batch *b, const oar_tensor *log_probs,
                              const oar_tensor *targets, const oar_tensor *input_lengths,
                              const oar_tensor *target_lengths, int64_t blank);
void oar_ctc_batch_free(oar_ctc_batch *b);

/* Sample n's extended labels ext[0, 2 len + 1) and skip[s]: whether state s may be entered from
 * s - 2 (a label after a blank, unlike the label before that blank). Returns the state count. */
int64_t oar_ctc_extend(const oar_ctc_batch *b, int64_t n, int64_t *ext, bool *skip);

#endif
