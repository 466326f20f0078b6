/* The device side of compiled programs that runs without a GPU (docs/cuda.md, "Compiled
 * programs and CUDA graphs"): the CUDA graphs switch (environment and API, and its refusal
 * in a build without CUDA), what host programs report, a program on the GPU refused with a
 * message where there is no GPU, host-only passes skipped for GPU programs, and the
 * predictor's device choice. The GPU paths themselves are in tests/cuda/test_cuda.c. */
#include "graph_test_util.h"

#include "graph/exec.h"
#include "graph/jit.h"
#include "graph/passes/passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static oar_status double_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)user; (void)n_in; (void)n_out;
    out[0] = oar_mul_scalar(oar_relu(in[0]), 2.0);
    return out[0] ? OAR_OK : oar_last_status();
}

/* OAR_CUDA_GRAPHS=0 (set by main before the first query) starts the switch off. */
static void graphs_switch(void) {
    CHECK(!oar_cuda_graphs_enabled());
    oar_status st = oar_cuda_graphs_set_enabled(true);
    if (oar_cuda_is_built()) {
        CHECK(st == OAR_OK && oar_cuda_graphs_enabled());
    } else {
        CHECK(st == OAR_ERR_UNSUPPORTED && !oar_cuda_graphs_enabled());
        CHECK(strstr(oar_last_error(), "oar_cuda_graphs_set_enabled") && strstr(oar_last_error(), "no CUDA"));
    }
    CHECK(oar_cuda_graphs_set_enabled(false) == OAR_OK && !oar_cuda_graphs_enabled());
    oar_clear_error();
}

/* A host program runs as before and says it has no graphs, whatever the switch says. */
static void host_programs(void) {
    oar_jit *f = oar_jit_to_static(double_fn, NULL, NULL);
    CHECK(oar_jit_cuda_graph_count(f, 0) == -1 && strcmp(oar_jit_cuda_graph_note(f, 0), "no such program") == 0);
    int64_t shape[2] = {3, 5};
    oar_tensor *x = oar_randn(shape, 2, OAR_F32), *want = NULL, *y[3] = {0};
    CHECK(double_fn(NULL, &x, 1, &want, 1) == OAR_OK);
    for (int k = 0; k < 3; k++) {
        if (oar_cuda_is_built()) CHECK(oar_cuda_graphs_set_enabled(k != 1) == OAR_OK);
        CHECK(oar_jit_call(f, &x, 1, &y[k], 1) == OAR_OK && t_same_bits(y[k], want));
    }
    CHECK(oar_jit_cuda_graph_count(f, 0) == 0);
    CHECK(strcmp(oar_jit_cuda_graph_note(f, 0), "host program: no graphs") == 0);
    CHECK(oar_jit_cuda_graph_count(NULL, 0) == -1);
    oar_jit_free(f);
}

/* A program whose values live on the GPU: without one, preparing it fails with a message
 * naming the program and the device, and nothing leaks. */
static void gpu_program_without_gpu(void) {
    if (oar_cuda_is_available()) {
        printf("test_graph_device: a GPU is present; the refusal without one is not checked here\n");
        return;
    }
    const int64_t s[2] = {4, 6};
    oar_program *p = oar_program_new();
    int x = gt_input(p, s, 2);
    int r = GT_OP(p, relu, "", x);
    CHECK(oar_program_add_output(p, GT_MAIN, r) == OAR_OK);
    p->device = OAR_CUDA;
    oar_program *q = oar_program_copy(p);
    CHECK(q && q->device == OAR_CUDA); /* copies (specialization) keep the device */
    oar_clear_error();
    oar_exec *e = oar_exec_create(p);
    CHECK(e == NULL);
    CHECK(strstr(oar_last_error(), "program") && strstr(oar_last_error(), "cuda"));
    oar_exec_free(e);
    oar_program_free(q);
    oar_program_free(p);
    oar_clear_error();
}

/* A predictor asked for the GPU where there is none refuses with a message; on the host,
 * oar_predictor_create_on(.., OAR_CPU) is oar_predictor_create. */
static void predictor_devices(void) {
    oar_jit *f = oar_jit_to_static(double_fn, NULL, NULL);
    int64_t shape[2] = {3, 5};
    oar_tensor *x = oar_randn(shape, 2, OAR_F32), *y = NULL;
    char base[64], file[80]; /* per process: the ISA variants of this test run side by side */
    snprintf(base, sizeof base, "test_graph_device_double_%d", (int)getpid());
    CHECK(oar_jit_call(f, &x, 1, &y, 1) == OAR_OK && oar_jit_save(f, base) == OAR_OK);
    oar_predictor_config cfg = {.model_path = base};
    oar_predictor *host = oar_predictor_create_on(&cfg, OAR_CPU);
    CHECK(host && oar_predictor_set_input(host, oar_predictor_input_name(host, 0), x) == OAR_OK);
    CHECK(oar_predictor_run(host) == OAR_OK);
    oar_tensor *got = oar_predictor_get_output(host, oar_predictor_output_name(host, 0));
    CHECK(got && t_same_bits(got, y));
    oar_release(got);
    if (!oar_cuda_is_available()) {
        oar_clear_error();
        CHECK(oar_predictor_create_on(&cfg, OAR_CUDA) == NULL);
        CHECK(strstr(oar_last_error(), "predictor_create_on") && strstr(oar_last_error(), "cuda"));
        oar_clear_error();
    }
    oar_predictor_free(host);
    oar_jit_free(f);
    snprintf(file, sizeof file, "%s.json", base);
    remove(file);
    snprintf(file, sizeof file, "%s.safetensors", base);
    remove(file);
}

static oar_status forward_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in; (void)n_out;
    out[0] = oar_forward((oar_module *)user, in[0]);
    return out[0] ? OAR_OK : oar_last_status();
}

static int count_op(const oar_program *p, oar_op_id op) {
    int n = 0;
    for (int i = 0; i < p->n_nodes; i++) n += !p->nodes[i].dead && p->nodes[i].op == op;
    return n;
}

/* Passes for the host only (oneDNN's NHWC layout) leave programs on the GPU alone: the same
 * ResNet-20 inference program gets its NHWC conversion as a host program only. */
static void cpu_only_passes(void) {
    const oar_kernel_entry *k;
    bool onednn = false;
    for (int i = 0, n = oar_op_kernels(OAR_OP_conv2d_act, &k); i < n; i++) onednn |= !strcmp(k[i].impl, "onednn");
    if (!onednn) {
        printf("test_graph_device: no oneDNN convolutions in this build; the layout pass check is skipped\n");
        return;
    }
    oar_scope_begin();
    oar_manual_seed(5);
    oar_module *m = oar_zoo_create("resnet20", NULL);
    oar_module_train(m, false);
    oar_jit_opts o = {.module = m};
    CHECK(oar_build_strategy_set(&o.strategy, "conv_nhwc", false) == OAR_OK);
    oar_jit *f = oar_jit_to_static(forward_fn, m, &o);
    oar_tensor *x = oar_randn((int64_t[]){2, 3, 32, 32}, 4, OAR_F32), *y = NULL;
    CHECK(oar_jit_call(f, &x, 1, &y, 1) == OAR_OK && f->n_entries == 1);
    int nhwc = oar_pass_find("conv_nhwc");
    oar_program *host = oar_program_copy(f->entries[0].program), *gpu = oar_program_copy(f->entries[0].program);
    gpu->device = OAR_CUDA;
    CHECK(count_op(host, OAR_OP_permute) == 0);
    CHECK(oar_passes_run(host, 1ull << nhwc, false) == OAR_OK && count_op(host, OAR_OP_permute) == 1);
    CHECK(oar_passes_run(gpu, 1ull << nhwc, false) == OAR_OK && count_op(gpu, OAR_OP_permute) == 0);
    oar_program_free(host);
    oar_program_free(gpu);
    oar_jit_free(f);
    oar_module_free(m);
    oar_scope_end();
}

int main(void) {
    setenv("OAR_CUDA_GRAPHS", "0", 1);
    oar_scope_begin(); /* the tensors the checks make */
    graphs_switch();
    host_programs();
    gpu_program_without_gpu();
    cpu_only_passes();
    predictor_devices();
    oar_scope_end();
    return test_summary("test_graph_device");
}
