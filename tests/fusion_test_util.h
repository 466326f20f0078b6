/* Shared by the fusion pass tests: how many nodes of an op a compiled program has, a compile
 * with one pass switched off by name, and the checks every pass's switch must pass. */
#ifndef OAR_FUSION_TEST_UTIL_H
#define OAR_FUSION_TEST_UTIL_H

#include "graph/jit.h"
#include "graph/passes/passes.h"
#include "test_util.h"

/* Nodes running op in the main block of f's first program. */
static inline int fusion_count_op(const oar_jit *f, oar_op_id op) {
    const oar_program *p = f->entries[0].program;
    const oar_block *b = &p->blocks[OAR_MAIN_BLOCK];
    int n = 0;
    for (int i = 0; i < b->n_nodes; i++) n += p->nodes[b->nodes[i]].op == op;
    return n;
}

/* fn compiled for module m and optimizer o (either may be NULL) with the pass named off
 * switched off (NULL: the default passes). */
static inline oar_jit *fusion_compile(oar_static_fn fn, void *user, const char *off, oar_module *m,
                                      oar_optimizer *o) {
    oar_jit_opts jo = {.module = m, .optimizer = o};
    if (off) CHECK(oar_build_strategy_set(&jo.strategy, off, false) == OAR_OK);
    return oar_jit_to_static(fn, user, &jo);
}

/* pass exists, runs before the pass named before, is on by default and can be switched off. */
static inline void fusion_check_switch(const char *pass, const char *before) {
    oar_build_strategy s = {0};
    int i = oar_pass_find(pass);
    CHECK(i >= 0 && i < oar_pass_find(before) && ((oar_build_strategy_mask(&s) >> i) & 1u));
    CHECK(oar_build_strategy_set(&s, pass, false) == OAR_OK && !((oar_build_strategy_mask(&s) >> i) & 1u));
}

#endif
