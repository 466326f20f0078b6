/* Shared by the tests of quantized programs (test_quant_program.c, test_quant_nhwc.c): a
 * temporary folder for the model files, exporting a module's fp32 program, running a saved
 * program in the predictor with one pass switched off, and counting a program's nodes of an op
 * after the inference passes (all, or all but one). Include after test_util.h. */
#ifndef OAR_QUANT_PROGRAM_UTIL_H
#define OAR_QUANT_PROGRAM_UTIL_H

#include "graph/passes/passes.h"
#include "graph/serialize.h"

#include <unistd.h>

static char g_dir[256];

static const char *path_in(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

/* Makes g_dir (from a mkdtemp template such as "/tmp/oar-x-XXXXXX"); false when it cannot. */
static bool files_begin(const char *template_) {
    snprintf(g_dir, sizeof g_dir, "%s", template_);
    if (mkdtemp(g_dir)) return true;
    perror("mkdtemp");
    return false;
}

/* Removes g_dir, unless OAR_TEST_KEEP asks to look at the programs. */
static void files_end(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (getenv("OAR_TEST_KEEP")) printf("files kept in %s\n", g_dir);
    else if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
}

static oar_status forward_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    out[0] = oar_forward(user, in[0]);
    return out[0] ? OAR_OK : oar_last_status();
}

/* Exports m (eval mode) with a dynamic batch and the strategy quantization wants. */
static void export_fp32(oar_module *m, int64_t c, int64_t hw, const char *path) {
    oar_input_spec spec = {OAR_F32, 4, {-1, c, hw, hw}, "images"};
    oar_jit_opts o = {.specs = &spec, .n_specs = 1, .module = m};
    oar_quant_export_strategy(&o.strategy);
    oar_jit *f = oar_jit_to_static(forward_fn, m, &o);
    oar_tensor *x = oar_randn((int64_t[]){2, c, hw, hw}, 4, OAR_F32), *y = NULL;
    CHECK(f && oar_jit_call(f, &x, 1, &y, 1) == OAR_OK);
    CHECK(oar_jit_save(f, path) == OAR_OK);
    oar_jit_free(f);
}

/* The predictor's output for x, with the pass named off_pass switched off (NULL: none). */
static oar_tensor *predict(const char *path, oar_tensor *x, const char *off_pass) {
    oar_predictor_config cfg = {.model_path = path};
    if (off_pass) CHECK(oar_build_strategy_set(&cfg.strategy, off_pass, false) == OAR_OK);
    oar_predictor *p = oar_predictor_create(&cfg);
    CHECK(p != NULL);
    if (!p) return NULL;
    oar_tensor *y = NULL;
    if (oar_predictor_set_input(p, oar_predictor_input_name(p, 0), x) == OAR_OK && oar_predictor_run(p) == OAR_OK)
        y = oar_predictor_get_output(p, oar_predictor_output_name(p, 0));
    oar_predictor_free(p);
    return y;
}

/* Nodes of op in the saved program after the default inference passes (what the predictor runs). */
static int count_after_passes(const char *path, oar_op_id op) {
    oar_program *p = oar_program_load(path);
    CHECK(p != NULL);
    if (!p) return -1;
    int n = -1;
    if (oar_passes_run(p, oar_build_strategy_mask(NULL), false) == OAR_OK) {
        n = 0;
        for (int i = 0; i < p->n_nodes; i++) n += !p->nodes[i].dead && p->nodes[i].op == op;
    }
    oar_program_free(p);
    return n;
}

/* Nodes of op after the default inference passes less the pass named off. */
static int count_after_passes_without(const char *path, oar_op_id op, const char *off) {
    oar_program *p = oar_program_load(path);
    oar_build_strategy s = {0};
    CHECK(p && oar_build_strategy_set(&s, off, false) == OAR_OK);
    int n = -1;
    if (p && oar_passes_run(p, oar_build_strategy_mask(&s), false) == OAR_OK) {
        n = 0;
        for (int i = 0; i < p->n_nodes; i++) n += !p->nodes[i].dead && p->nodes[i].op == op;
    }
    oar_program_free(p);
    return n;
}

#endif
