/* Sweep cases for ctc_loss and ctc_loss_backward: inputs log_probs [T, N, C]; targets (padded
 * [N, S] or concatenated); input_lengths [N]; target_lengths [N]. The lengths are given values,
 * so the zero-size pass cannot empty T (the lengths would exceed it): those cases say
 * SWEEP_NO_BATCH, and empty batches and frames are cases of their own. Unnormalized log_probs
 * (normal values) are fine: the loss is defined for any, and finite differences check the
 * exact derivative. */
#include "sweep.h"

#define NB SWEEP_NO_BATCH
#define ZI(z) "blank=0 zero_infinity=" #z

/* targets;input_lengths;target_lengths after the log_probs */
#define PADDED "c1,2,3,3,1,2i64:2x3;c6,5i64:2;c3,2i64:2"
#define REPEATS "c1,1,2,2,2,2i64:2x3;c7,6i64:2;c3,3i64:2"
#define CONCAT "c1,2,2,3,1i32:5;c5,4i32:2;c2,3i32:2"
#define MIXED "c1,2,3,4,5,5,5,1,4,3,2,1i64:3x4;c12,9,4i64:3;c4,3,0i64:3"

const sweep_case sweep_cases_ctc[] = {
    {"ctc_loss", "n:6x2x4;" PADDED, ZI(0), NB},
    {"ctc_loss", "n:7x2x3;" REPEATS, ZI(0), NB}, /* repeats: a blank between equal labels */
    {"ctc_loss", "n:5x2x4;" CONCAT, ZI(1), NB},  /* concatenated i32 targets, input_length < T */
    {"ctc_loss", "n:12x3x6;" MIXED, ZI(0), NB},  /* an empty target; the band of states cut at both ends */
    {"ctc_loss", "n:4x2x4;c0,1,1,2i64:2x2;c4,3i64:2;c2,2i64:2", "blank=3 zero_infinity=0", NB}, /* blank 3 */
    {"ctc_loss", "n:1x1x3;c2i64:1x1;c1i64:1;c1i64:1", ZI(0), NB}, /* one frame, one label */
    /* the first target (1 1 2) needs 4 frames and has 3: inf, or 0 and no gradient */
    {"ctc_loss", "n:3x2x4;c1,1,2,3,1,1i64:2x3;c3,3i64:2;c3,1i64:2", ZI(1), NB},
    {"ctc_loss", "n:3x2x4;c1,1,2,3,1,1i64:2x3;c3,3i64:2;c3,1i64:2", ZI(0), NB | SWEEP_NO_GRAD},
    /* no frames: the empty target costs 0, the other has no alignment */
    {"ctc_loss", "n:4x2x3;c1,2i64:2x1;c0,0i64:2;c0,1i64:2", ZI(1), NB},
    {"ctc_loss", "n:0x2x3;c1,2i64:2x1;c0,0i64:2;c0,1i64:2", ZI(1), NB}, /* T = 0 */
    {"ctc_loss", "n:5x0x4;c1i64:0x2;c1i64:0;c1i64:0", ZI(0)},            /* N = 0 */

    /* ctc_loss_backward(grad, log_probs, ...): its own rule refuses second order, as torch */
    {"ctc_loss_backward", "n:2;n:6x2x4;" PADDED, ZI(0), NB | SWEEP_NO_GRAD},
    {"ctc_loss_backward", "n:2;n:7x2x3;" REPEATS, ZI(0), NB | SWEEP_NO_GRAD},
    {"ctc_loss_backward", "n:2;n:5x2x4;" CONCAT, ZI(1), NB | SWEEP_NO_GRAD},
    {"ctc_loss_backward", "n:3;n:12x3x6;" MIXED, ZI(0), NB | SWEEP_NO_GRAD},
    {"ctc_loss_backward", "n:2;n:3x2x4;c1,1,2,3,1,1i64:2x3;c3,3i64:2;c3,1i64:2", ZI(1), NB | SWEEP_NO_GRAD},
    {"ctc_loss_backward", "n:2;n:3x2x4;c1,1,2,3,1,1i64:2x3;c3,3i64:2;c3,1i64:2", ZI(0), NB | SWEEP_NO_GRAD},
    {"ctc_loss_backward", "n:2;n:4x2x3;c1,2i64:2x1;c0,3i64:2;c0,1i64:2", ZI(1), NB | SWEEP_NO_GRAD},
    {"ctc_loss_backward", "n:0;n:5x0x4;c1i64:0x2;c1i64:0;c1i64:0", ZI(0), SWEEP_NO_GRAD},
    {0},
};

/* ---- bad inputs: log_probs [5, 2, 4] (f32 unless said), blank 0 */
static oar_tensor *lp(oar_dtype dt) {
    int64_t s[3] = {5, 2, 4};
    return oar_zeros(s, 3, dt);
}
static oar_tensor *ints(const int64_t *v, int64_t n) { return oar_from_data(v, &n, 1, OAR_I64); }
static oar_tensor *grid(const int64_t *v, int64_t rows, int64_t cols) {
    int64_t s[2] = {rows, cols};
    return oar_from_data(v, s, 2, OAR_I64);
}
static const int64_t k_rows[4] = {1, 2, 3, 1}, k_in[2] = {5, 5}, k_tl[2] = {2, 2};

static bool call(oar_tensor *x, oar_tensor *t, oar_tensor *il, oar_tensor *tl, int64_t blank) {
    return oar_ctc_loss(x, t, il, tl, blank, false) != NULL;
}
static bool short_input_lengths(void) {
    int64_t il[3] = {5, 5, 5};
    return call(lp(OAR_F32), grid(k_rows, 2, 2), ints(il, 3), ints(k_tl, 2), 0);
}
static bool short_target_lengths(void) {
    return call(lp(OAR_F32), grid(k_rows, 2, 2), ints(k_in, 2), ints(k_tl, 1), 0);
}
static bool label_is_blank(void) {
    int64_t rows[4] = {1, 2, 0, 3};
    return call(lp(OAR_F64), grid(rows, 2, 2), ints(k_in, 2), ints(k_tl, 2), 0);
}
static bool label_out_of_range(void) {
    int64_t rows[4] = {1, 4, 2, 3};
    return call(lp(OAR_F32), grid(rows, 2, 2), ints(k_in, 2), ints(k_tl, 2), 0);
}
static bool concat_label_out_of_range(void) {
    int64_t flat[4] = {1, 2, 3, 9};
    return call(lp(OAR_F32), ints(flat, 4), ints(k_in, 2), ints(k_tl, 2), 0);
}
static bool input_length_past_t(void) {
    int64_t il[2] = {5, 6};
    return call(lp(OAR_F32), grid(k_rows, 2, 2), ints(il, 2), ints(k_tl, 2), 0);
}
static bool target_length_past_columns(void) {
    int64_t tl[2] = {3, 1};
    return call(lp(OAR_F32), grid(k_rows, 2, 2), ints(k_in, 2), ints(tl, 2), 0);
}
static bool negative_target_length(void) {
    int64_t tl[2] = {1, -1};
    return call(lp(OAR_F32), grid(k_rows, 2, 2), ints(k_in, 2), ints(tl, 2), 0);
}
static bool concat_too_short(void) {
    int64_t tl[2] = {2, 3};
    return call(lp(OAR_F32), ints(k_rows, 4), ints(k_in, 2), ints(tl, 2), 0);
}
static bool blank_out_of_range(void) {
    return call(lp(OAR_F32), grid(k_rows, 2, 2), ints(k_in, 2), ints(k_tl, 2), 4);
}
static bool half_log_probs(void) {
    return call(lp(OAR_F16), grid(k_rows, 2, 2), ints(k_in, 2), ints(k_tl, 2), 0);
}
static bool float_targets(void) {
    int64_t s[2] = {2, 2};
    return call(lp(OAR_F32), oar_zeros(s, 2, OAR_F32), ints(k_in, 2), ints(k_tl, 2), 0);
}
static bool unbatched_log_probs(void) {
    int64_t s[2] = {5, 4};
    return call(oar_zeros(s, 2, OAR_F32), grid(k_rows, 2, 2), ints(k_in, 2), ints(k_tl, 2), 0);
}
static bool targets_batch_mismatch(void) {
    return call(lp(OAR_F32), grid(k_rows, 4, 1), ints(k_in, 2), ints(k_tl, 2), 0);
}
/* the second derivative (as in torch, not offered) */
static bool second_order(void) {
    oar_tensor *x = lp(OAR_F64);
    oar_set_requires_grad(x, true);
    oar_tensor *loss = oar_sum(oar_ctc_loss(x, grid(k_rows, 2, 2), ints(k_in, 2), ints(k_tl, 2), 0, false), NULL, 0,
                               false);
    oar_tensor *g = NULL, *gg = NULL;
    oar_grad_opts o = {.create_graph = true};
    if (!loss || oar_grad(&loss, 1, NULL, &x, 1, &g, &o) != OAR_OK) return false;
    oar_tensor *s = oar_sum(g, NULL, 0, false); /* the gradients belong to the case's scope, as in test_autograd */
    return s && oar_grad(&s, 1, NULL, &x, 1, &gg, NULL) == OAR_OK;
}

const sweep_bad sweep_bad_ctc[] = {
    {"ctc_loss with 3 input lengths for 2 samples", short_input_lengths,
     "ctc_loss: expected input_lengths of shape [2] (one per sample of log_probs [5, 2, 4]), got [3]"},
    {"ctc_loss with 1 target length for 2 samples", short_target_lengths,
     "ctc_loss: expected target_lengths of shape [2] (one per sample of log_probs [5, 2, 4]), got [1]"},
    {"ctc_loss with the blank as a label", label_is_blank,
     "ctc_loss: targets[1][0] is the blank (0); expected labels in [0, 4) other than the blank"},
    {"ctc_loss with a label past the classes", label_out_of_range,
     "ctc_loss: targets[0][1] = 4 is outside [0, 4) (the classes of log_probs)"},
    {"ctc_loss with a concatenated label past the classes", concat_label_out_of_range,
     "ctc_loss: targets[3] (sample 1) = 9 is outside [0, 4)"},
    {"ctc_loss with an input length past T", input_length_past_t,
     "ctc_loss: input_lengths[1] = 6 is outside [0, 5] (the frames of log_probs)"},
    {"ctc_loss with a target length past the columns", target_length_past_columns,
     "ctc_loss: target_lengths[0] = 3 exceeds the targets' 2 columns"},
    {"ctc_loss with a negative target length", negative_target_length,
     "ctc_loss: target_lengths[1] = -1 is negative"},
    {"ctc_loss with concatenated targets shorter than the lengths", concat_too_short,
     "ctc_loss: target_lengths sum to 5, but targets has 4 labels"},
    {"ctc_loss with blank 4 of 4 classes", blank_out_of_range,
     "ctc_loss: expected blank in [0, 4) (the classes of log_probs [5, 2, 4]), got 4"},
    {"ctc_loss of f16 log_probs", half_log_probs, "ctc_loss: expected log_probs of dtype f32 or f64, got f16"},
    {"ctc_loss with float targets", float_targets, "ctc_loss: expected targets of dtype i32 or i64, got f32"},
    {"ctc_loss of [T, C] log_probs", unbatched_log_probs, "ctc_loss: expected log_probs of shape [T, N, C], got [5, 4]"},
    {"ctc_loss with targets of 4 rows for 2 samples", targets_batch_mismatch,
     "expected targets of shape [2, S] (padded) or [sum of target_lengths] (concatenated)"},
    {"ctc_loss differentiated twice", second_order, "second-order gradients of ctc_loss are not offered"},
    {0},
};
