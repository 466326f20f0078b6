/* Graph passes: each is one file with one function that rewrites a program in place and keeps
 * its results equal. They are listed once in the table of pass.c with a name and whether the
 * default build strategy runs them, so a user switches any of them by name
 * (oar_build_strategy_set). Fusion passes of the performance work are added the same way. */
#ifndef OAR_GRAPH_PASSES_H
#define OAR_GRAPH_PASSES_H

#include "graph/ir.h"

typedef oar_status (*oar_pass_fn)(oar_program *p);

typedef struct oar_pass_info {
    const char *name;        /* "dead_code", "cse", "constant_folding", "inplace", ... */
    const char *summary;     /* one line for `oar inspect --passes` and docs */
    bool default_on;
    bool inference_only;     /* skipped when the program trains (e.g. conv+bn folding) */
    oar_pass_fn run;
    bool cpu_only;           /* skipped in programs on other devices (oneDNN layouts) */
} oar_pass_info;

int oar_pass_count(void);
const oar_pass_info *oar_pass_at(int i);
int oar_pass_find(const char *name); /* -1 if unknown */

/* Runs the enabled passes (bit i of mask enables pass i) in table order, verifying the program
 * after each one; training says whether the program updates parameters. */
oar_status oar_passes_run(oar_program *p, uint64_t mask, bool training);

/* The passes a strategy enables: (table defaults | enable) & ~disable; a zeroed struct (or
 * NULL) gives the defaults. */
uint64_t oar_build_strategy_mask(const oar_build_strategy *s);

/* Bytes the planned intermediates (arena-class roots) would take with no reuse: the sum of
 * their sizes, for the memory report (plan.c). -1 with the error set on failure. */
int64_t oar_plan_naive_bytes(const oar_program *p);

/* Shared by passes (pass.c); each returns a malloc'd array the caller frees, NULL on OOM.
 * value_roots: per value, the value owning its memory (views and in-place outputs alias input
 * 0's root). mutable_roots: per root, whether some node mutates it in place (through any
 * alias). mutable_values: per value, whether its memory may change while the program runs. */
int *oar_pass_value_roots(const oar_program *p);
bool *oar_pass_mutable_roots(const oar_program *p, const int *root);
bool *oar_pass_mutable_values(const oar_program *p);

/* For passes that add nodes (pass_emit.c). insert_node: a node of op in block at position pos
 * of its node list (-1: last), output metas inferred from its inputs; the node id, or -1 with
 * the error set. scalar_const: a 0-d constant value on the program's device; its id or -1.
 * const_value: the value of a one-element float constant wherever it lives, else NAN. */
int oar_pass_insert_node(oar_program *p, int block, int pos, oar_op_id op, const int *in, int n_in,
                         const oar_attr *attrs, int *out_ids);
int oar_pass_scalar_const(oar_program *p, double value, oar_dtype dt);
double oar_pass_const_value(const oar_program *p, int v);

/* The passes themselves (one file each). */
oar_status oar_pass_dead_code(oar_program *p);        /* dead_code.c */
oar_status oar_pass_cse(oar_program *p);              /* cse.c */
oar_status oar_pass_constant_folding(oar_program *p); /* constant_folding.c */
oar_status oar_pass_fuse_all_optimizer_ops(oar_program *p); /* fuse_optimizer.c */
oar_status oar_pass_fuse_attention(oar_program *p);  /* fuse_attention.c */
oar_status oar_pass_fold_conv_bn(oar_program *p);     /* fold_conv_bn.c (inference only) */
oar_status oar_pass_fuse_conv_act(oar_program *p);    /* fuse_conv_act.c (inference only) */
oar_status oar_pass_fuse_quant(oar_program *p);       /* fuse_quant.c (inference only) */
oar_status oar_pass_conv_nhwc(oar_program *p);        /* conv_nhwc.c (inference only) */
oar_status oar_pass_quant_nhwc(oar_program *p);       /* conv_nhwc.c: the int8 convolutions (inference only) */
oar_status oar_pass_fuse_qadd(oar_program *p);        /* fuse_qadd.c: qadd into qconv2d_nhwc (inference only) */
oar_status oar_pass_concat_conv_split(oar_program *p); /* concat_conv.c: run by conv_nhwc */
oar_status oar_pass_inplace(oar_program *p);          /* inplace.c: marks oar_node.inplace */
oar_status oar_pass_fuse_linear_act(oar_program *p);  /* fuse_linear_act.c */
oar_status oar_pass_fuse_elementwise(oar_program *p); /* fuse_elementwise.c */
oar_status oar_pass_fuse_add_layer_norm(oar_program *p); /* fuse_add_layer_norm.c */
oar_status oar_pass_fuse_bn_act(oar_program *p);      /* fuse_bn_act.c */
oar_status oar_pass_amp_casts(oar_program *p);        /* amp_casts.c */
oar_status oar_pass_bucket_allreduce(oar_program *p); /* bucket_allreduce.c */

#endif
