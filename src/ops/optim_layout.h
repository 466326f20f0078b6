/* The input layout of the optimizer update ops (optimizer_update, optimizer_update_multi),
 * shared by the optimizers that emit them (src/optim) and the pass that merges them
 * (graph/passes/fuse_optimizer.c), so the compiler needs the ops' layout, not the optimizers. */
#ifndef OAR_OPS_OPTIM_LAYOUT_H
#define OAR_OPS_OPTIM_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

/* State slots, in the order they are listed (and named) by oar_optimizer_state. */
typedef enum oar_slot {
    OAR_SLOT_STEP = 0,        /* i64 scalar: the parameter's own update count */
    OAR_SLOT_MOMENTUM_BUFFER,
    OAR_SLOT_EXP_AVG,
    OAR_SLOT_EXP_AVG_SQ,
    OAR_SLOT_MAX_EXP_AVG_SQ,
    OAR_SLOT_SQUARE_AVG,
    OAR_SLOT_GRAD_AVG,
    OAR_SLOT_SUM,
    OAR_SLOT_ACC_DELTA,       /* Adadelta */
    OAR_SLOT_EXP_INF,         /* Adamax */
    OAR_SLOT_MU_PRODUCT,      /* NAdam: an f32 scalar, as torch's default-dtype tensor */
    OAR_SLOT_ETA,             /* ASGD: an f32 scalar */
    OAR_SLOT_MU,              /* ASGD: an f32 scalar */
    OAR_SLOT_AX,              /* ASGD */
    OAR_SLOT_PREV,            /* Rprop */
    OAR_SLOT_STEP_SIZE,       /* Rprop */
    OAR_SLOT_COUNT
} oar_slot;

/* Slots that are scalars kept on the host (read and written by the launching code, like the
 * step count) rather than tensors of their parameter's shape. */
static inline bool oar_slot_is_scalar(int s) {
    return s == OAR_SLOT_STEP || s == OAR_SLOT_MU_PRODUCT || s == OAR_SLOT_ETA || s == OAR_SLOT_MU;
}

extern const char *const oar_slot_names[OAR_SLOT_COUNT];

/* optimizer_update_multi: inputs 0..OAR_OPTIM_MULTI_STATE-1 hold what it writes (per parameter:
 * param, hyper, then the slots of the `slots` mask, in oar_slot order), then one gradient per
 * parameter. */
#define OAR_OPTIM_MULTI_STATE 32
#define OAR_OPTIM_MULTI_MAX (OAR_OPTIM_MULTI_STATE / 2) /* parameters: at least param and hyper each */

/* State inputs per parameter under a slots mask: param, hyper and one per slot set. */
static inline int oar_optim_multi_group(int64_t slots) {
    int n = 2;
    for (int s = 0; s < OAR_SLOT_COUNT; s++) n += (int)((slots >> s) & 1);
    return n;
}

#endif
