/* The op sweep: one table of cases per op family. Every registered op needs at least one
 * case; the sweep runs each case through every kernel, checks gradients by finite
 * differences, and runs the family's bad-input cases. */
#ifndef OAR_SWEEP_H
#define OAR_SWEEP_H

#include "ops/op.h"

/* A case. inputs: ';'-separated specs KIND:SHAPE where SHAPE is like 2x3x4 (empty: a 0-d
 * tensor) and KIND is
 *   n  normal(0,1)            u  uniform(-1,1)          p  uniform(0.5,2) (positive)
 *   d  distinct values (no ties; for max/sort/pool)     b  random bool
 *      (multiples of 0.25; even sizes never contain 0, odd sizes do, and contain x.5 ties)
 *   iLO_HI  int64 in [LO,HI)  (e.g. i0_5)                none  a NULL optional input
 *   cV,V,...  the given values (up to 32), repeated to fill the tensor (e.g. c0.1,0.9f64:4)
 *   nI32 etc.: append a dtype to fix it (f32,f64,f16,bf16,i8,u8,i32,i64,bool); otherwise float
 *   kinds take the dtype of the pass (f32 for kernels, f64 for gradients).
 * attrs: space-separated name=value pairs, one per schema attribute, in any order:
 *   ints as 1,2,3 (empty for none), floats as 0.5 or inf, strings verbatim.
 * Inputs an op writes in place (its mutated_inputs) start every run from the case's values,
 * stay contiguous in the non-contiguous pass, and are compared like outputs. */
typedef struct sweep_case {
    const char *op;
    const char *inputs;
    const char *attrs;
    unsigned flags;
    double tol; /* relative and absolute tolerance for f32 kernel comparisons; 0: 1e-4 */
} sweep_case;

enum {
    SWEEP_NO_GRAD = 1u << 0,   /* skip the finite-difference check (kinks, discrete outputs) */
    SWEEP_NO_STRIDED = 1u << 1,/* skip the non-contiguous pass */
    SWEEP_NO_BATCH = 1u << 2,  /* every input has a fixed shape (state such as an optimizer's hyper
                                  tensor): no batch to empty in the zero-size pass */
    SWEEP_LONG_CHAIN = 1u << 3,/* the reference rounds each of many steps in bf16/f16, a via-f32 kernel once:
                                  the low-precision pass allows 5 times its tolerance */
    SWEEP_GRAD_NOT_IN0 = 1u << 4,/* input 0 has no derivative (torch defines none: gammainc's a, zeta's x): the
                                  check differentiates the other inputs; a bad case asserts the refusal */
};

/* A bad-input case: call() must fail (return false) and the message must contain expect. */
typedef struct sweep_bad {
    const char *what;
    bool (*call)(void);
    const char *expect;
} sweep_bad;

/* Each family defines sweep_cases_<family>[] and sweep_bad_<family>[], ended by a zero entry. */
#define SWEEP_FAMILY(f) extern const sweep_case sweep_cases_##f[]; extern const sweep_bad sweep_bad_##f[];
#include "sweep_families.def"
#undef SWEEP_FAMILY

typedef struct sweep_family {
    const char *name;
    const sweep_case *cases;
    const sweep_bad *bad;
} sweep_family;
extern const sweep_family sweep_families[];
extern const int sweep_n_families;

/* Number of cases naming op (used by `oar ops` to report coverage). */
int sweep_count_cases(const char *op);

#endif
