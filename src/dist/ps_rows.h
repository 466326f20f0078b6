/* A parameter-server table's optimizer restricted to the rows a step touched (ps.c, ps_server.c,
 * ps_worker.c). The state slots are plain [rows, dim] arrays beside the rows; an update gathers
 * the touched rows of the parameter, the gradient and each slot into compact buffers, runs oar's
 * fused update kernel over them once (the same arithmetic, element for element, as a dense
 * oar_optimizer_step), and scatters them back. Rows nobody pushed, and their state, are left
 * exactly as they were: the lazy semantics of sparse optimizers (TensorFlow's LazyAdam, Paddle's
 * lazy_mode): Adam's moments and weight decay touch a row only when it has a gradient. The step
 * count t is the table's updates (bias correction and Adagrad's lr decay use it, as a dense step
 * does), not the row's.
 * For SGD, Adagrad and RMSprop without weight decay or momentum the result equals a dense
 * update bit for bit (a zero gradient leaves a row unchanged there); LAMB is refused (its trust
 * ratio is a norm over the whole table). */
#ifndef OAR_DIST_PS_ROWS_H
#define OAR_DIST_PS_ROWS_H

#include "optim/optim.h"

typedef struct ps_rows {
    oar_optim_opts o;              /* resolved */
    int64_t rows, dim, t;          /* t: updates made */
    float *slot[OAR_SLOT_COUNT];   /* [rows, dim] each, NULL where the options use none */
    uint8_t *seen;                 /* SGD with momentum: rows whose buffer was filled */
    uint8_t *touched;              /* rows with a gradient gathered since the last update */
    int64_t *list, n_touched;      /* those rows, in the order first touched */
    float *scratch;                /* compact buffers: param, grad, then each used slot */
    int64_t scratch_rows;
} ps_rows;

/* State for a [rows, dim] table under options in (resolved here; LAMB refused). */
oar_status ps_rows_init(ps_rows *r, const oar_optim_opts *in, int64_t rows, int64_t dim, const char *table);
void ps_rows_free(ps_rows *r);
/* Marks row i touched (its gradient is being gathered in the caller's grad buffer). */
static inline void ps_rows_touch(ps_rows *r, int64_t i) {
    if (!r->touched[i]) r->touched[i] = 1, r->list[r->n_touched++] = i;
}
/* One update of the touched rows of param with grad * scale (both [rows, dim]); then clears
 * their gradient rows and the touched set. A step with nothing touched changes no row but counts
 * in t, so every server of a sync job steps t alike. */
oar_status ps_rows_apply(ps_rows *r, float *param, float *grad, double scale);

#endif
