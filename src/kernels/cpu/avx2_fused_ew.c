/* AVX2/FMA f32 kernel for fused_elementwise (src/ops/fused_ew.c). The output is cut into tiles
 * of TILE floats; each instruction runs over the whole tile before the next, reading its
 * operands from the inputs (in place, or gathered when broadcast or strided) or from small per-thread
 * buffers ("slots") that hold the live intermediates, so the interpreter's dispatch costs one
 * switch per instruction per tile and intermediates never leave L1.
 *
 * Every opcode uses the vector helpers the unfused fast kernels use (avx2_math.h,
 * avx2_activation.h), lane by lane on the same f32 operands, so the result is bitwise equal to
 * running the unfused kernels one after another (the source is compiled as ISO C, so the
 * compiler does not contract a mul and a following add into an FMA). */
#include "kernels/cpu/avx2_elementwise.h"
#include "ops/fused_ew.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "kernels/cpu/avx2_activation.h"

#include <string.h>

#define TILE 256     /* floats per slot: 1 KiB */
#define MAX_SLOTS 24 /* gathered inputs + live intermediates */

typedef enum { IN_FULL, IN_SCALAR, IN_GATHER } in_form;

typedef struct few_job {
    int n_in, n_code, n_slots;
    oar_few_instr code[OAR_FEW_MAX_CODE];
    int slot[OAR_FEW_MAX_REGS];           /* slot of a gathered input or an intermediate; -1: none */
    in_form form[OAR_FEW_MAX_INPUTS];
    const float *base[OAR_FEW_MAX_INPUTS];
    float bcast[OAR_FEW_MAX_INPUTS][8];   /* IN_SCALAR inputs, repeated */
    int nd;                               /* output dims, for gathers */
    int64_t shape[OAR_MAX_DIMS];
    int64_t st[OAR_FEW_MAX_INPUTS][OAR_MAX_DIMS]; /* input strides over the output dims (0: broadcast) */
    float *y;
} few_job;

/* Lays out the job; false when the program needs more slots than the kernel has. */
static bool plan(oar_tensor *const *in, int n_in, oar_tensor *y, const oar_attr *a, few_job *j) {
    if (n_in > OAR_FEW_MAX_INPUTS || oar_few_decode(a, n_in, j->code, &j->n_code) != OAR_OK) {
        oar_clear_error();
        return false;
    }
    j->n_in = n_in;
    j->nd = y->ndim ? y->ndim : 1;
    for (int d = 0; d < j->nd; d++) j->shape[d] = y->ndim ? y->shape[d] : 1;
    int used = 0;
    for (int r = 0; r < OAR_FEW_MAX_REGS; r++) j->slot[r] = -1;
    for (int i = 0; i < n_in; i++) {
        const oar_tensor *x = in[i];
        j->base[i] = (const float *)oar_tensor_ptr(x);
        if (x->numel == y->numel && x->contiguous) j->form[i] = IN_FULL; /* broadcasting only added 1s */
        else if (x->numel == 1) j->form[i] = IN_SCALAR;
        else {
            j->form[i] = IN_GATHER;
            j->slot[i] = used++;
            for (int d = 0; d < j->nd; d++) { /* strides over the output dims, 0 where broadcast */
                int k = d - (j->nd - x->ndim);
                j->st[i][d] = (k < 0 || x->shape[k] == 1) ? 0 : x->strides[k];
            }
        }
        if (used > MAX_SLOTS) return false;
    }
    /* intermediates: a slot from the first write to the last read; the result needs none */
    int last[OAR_FEW_MAX_REGS], free_list[MAX_SLOTS], n_free = 0, n_slots = used;
    for (int r = 0; r < n_in + j->n_code; r++) last[r] = -1;
    for (int k = 0; k < j->n_code; k++) last[j->code[k].a] = last[j->code[k].b] = k;
    for (int k = 0; k < j->n_code - 1; k++) {
        int ops[2] = {j->code[k].a, j->code[k].b};
        for (int o = 0; o < 2; o++) /* an operand read for the last time frees its slot first */
            if (ops[o] >= n_in && last[ops[o]] == k && j->slot[ops[o]] >= 0 && (o == 0 || ops[1] != ops[0]))
                free_list[n_free++] = j->slot[ops[o]];
        int r = n_in + k;
        if (n_free) j->slot[r] = free_list[--n_free];
        else if (n_slots < MAX_SLOTS) j->slot[r] = n_slots++;
        else return false;
        if (last[r] <= k) free_list[n_free++] = j->slot[r]; /* never read */
    }
    j->n_slots = n_slots;
    j->y = (float *)oar_tensor_ptr(y);
    return true;
}

/* dst[0..n) = v: a broadcast run (a per-channel value over a row), 8 lanes a store. */
static OAR_AVX2 void fill(float *dst, int64_t n, float v) {
    __m256 x = _mm256_set1_ps(v);
    int64_t e = 0;
    for (; e + 8 <= n; e += 8) _mm256_storeu_ps(dst + e, x);
    for (; e < n; e++) dst[e] = v;
}

/* dst[0..len) = input i at output positions [t0, t0 + len), broadcast. */
static void gather(const few_job *j, int i, int64_t t0, int64_t len, float *dst) {
    int64_t idx[OAR_MAX_DIMS], off = 0, rem = t0;
    const int64_t *st = j->st[i];
    int last = j->nd - 1;
    for (int d = last; d >= 0; d--) {
        idx[d] = rem % j->shape[d];
        rem /= j->shape[d];
        off += idx[d] * st[d];
    }
    const float *src = j->base[i];
    while (len > 0) {
        int64_t run = j->shape[last] - idx[last];
        if (run > len) run = len;
        if (st[last] == 0)
            fill(dst, run, src[off]);
        else if (st[last] == 1)
            memcpy(dst, src + off, sizeof(float) * (size_t)run);
        else
            for (int64_t e = 0; e < run; e++) dst[e] = src[off + e * st[last]];
        dst += run;
        len -= run;
        off += run * st[last];
        idx[last] += run;
        for (int d = last; d > 0 && idx[d] == j->shape[d]; d--) { /* carry */
            off -= idx[d] * st[d];
            idx[d] = 0;
            idx[d - 1]++;
            off += st[d - 1];
        }
    }
}

#define LOOP1(EXPR)                                            \
    for (int64_t v = 0; v < nv; v++) {                         \
        __m256 x = _mm256_loadu_ps(pa + v * sa);               \
        _mm256_storeu_ps(pd + 8 * v, EXPR);                    \
    }                                                          \
    break
#define LOOP2(EXPR)                                            \
    for (int64_t v = 0; v < nv; v++) {                         \
        __m256 x = _mm256_loadu_ps(pa + v * sa);               \
        __m256 w = _mm256_loadu_ps(pb + v * sb);               \
        _mm256_storeu_ps(pd + 8 * v, EXPR);                    \
    }                                                          \
    break

/* One instruction over nv vectors: operands step sa/sb floats per vector (0: repeated). */
static OAR_AVX2 void run_instr(int opcode, const float *pa, int64_t sa, const float *pb, int64_t sb, float *pd,
                               int64_t nv) {
    switch (opcode) {
    case OAR_FEW_ADD: LOOP2(_mm256_add_ps(x, w));
    case OAR_FEW_SUB: LOOP2(_mm256_sub_ps(x, w));
    case OAR_FEW_MUL: LOOP2(_mm256_mul_ps(x, w));
    case OAR_FEW_DIV: LOOP2(_mm256_div_ps(x, w));
    case OAR_FEW_NEG: LOOP1(_mm256_xor_ps(x, _mm256_set1_ps(-0.0f)));
    case OAR_FEW_RELU: LOOP1(oar_v_relu(x));
    case OAR_FEW_SIGMOID: LOOP1(oar_v_sigmoid(x));
    case OAR_FEW_TANH: LOOP1(oar_v_tanh(x));
    case OAR_FEW_EXP: LOOP1(oar_v_exp(x));
    case OAR_FEW_LOG: LOOP1(oar_v_log(x));
    case OAR_FEW_SQRT: LOOP1(_mm256_sqrt_ps(x));
    case OAR_FEW_SQUARE: LOOP1(_mm256_mul_ps(x, x));
    case OAR_FEW_ABS: LOOP1(oar_v_abs(x));
    case OAR_FEW_SILU: LOOP1(_mm256_mul_ps(x, oar_v_sigmoid(x)));
    case OAR_FEW_GELU: LOOP1(oar_v_gelu_erf(x));
    case OAR_FEW_GELU_TANH: LOOP1(oar_v_gelu_tanh(x));
    case OAR_FEW_RELU_BACKWARD: LOOP2(oar_v_relu_backward(x, w));
    case OAR_FEW_GELU_BACKWARD: LOOP2(_mm256_mul_ps(x, oar_v_gelu_prime_erf(w)));
    case OAR_FEW_GELU_TANH_BACKWARD: LOOP2(_mm256_mul_ps(x, oar_v_gelu_prime_tanh(w)));
    default: break; /* plan() decoded the program: unreachable */
    }
}

/* Output positions [t0, t0 + len): len a multiple of 8 up to TILE, or a tail of 1..7. */
static void run_tile(const few_job *j, float (*slots)[TILE], int64_t t0, int64_t len) {
    const float *ptr[OAR_FEW_MAX_REGS];
    int64_t step[OAR_FEW_MAX_REGS];
    float tail_in[OAR_FEW_MAX_INPUTS][8], tail_out[8];
    bool tail = (len & 7) != 0;
    int64_t nv = (len + 7) / 8;
    for (int i = 0; i < j->n_in; i++) {
        step[i] = 8;
        switch (j->form[i]) {
        case IN_SCALAR:
            ptr[i] = j->bcast[i];
            step[i] = 0;
            break;
        case IN_FULL:
            if (!tail) {
                ptr[i] = j->base[i] + t0;
                break;
            }
            memset(tail_in[i], 0, sizeof tail_in[i]);
            memcpy(tail_in[i], j->base[i] + t0, sizeof(float) * (size_t)len);
            ptr[i] = tail_in[i];
            break;
        case IN_GATHER:
            gather(j, i, t0, len, slots[j->slot[i]]);
            memset(slots[j->slot[i]] + len, 0, sizeof(float) * (size_t)(nv * 8 - len)); /* pad lanes */
            ptr[i] = slots[j->slot[i]];
            break;
        }
    }
    for (int k = 0; k < j->n_code; k++) {
        const oar_few_instr *c = &j->code[k];
        int r = j->n_in + k;
        float *dst = k < j->n_code - 1 ? slots[j->slot[r]] : tail ? tail_out : j->y + t0;
        run_instr(c->opcode, ptr[c->a], step[c->a], ptr[c->b], step[c->b], dst, nv);
        ptr[r] = dst;
        step[r] = 8;
    }
    if (tail) memcpy(j->y + t0, tail_out, sizeof(float) * (size_t)len);
}

static void few_range(void *vjob, int64_t begin, int64_t end) {
    const few_job *j = vjob;
    float slots[MAX_SLOTS][TILE] __attribute__((aligned(32)));
    for (int64_t t = begin; t < end;) {
        int64_t len = end - t < TILE ? end - t : TILE;
        if (len >= 8) len &= ~(int64_t)7;
        run_tile(j, slots, t, len);
        t += len;
    }
}

static oar_status few_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                           const oar_attr *a) {
    (void)ctx; (void)n_out;
    few_job j;
    if (out[0]->numel == 0) return OAR_OK;
    if (!plan(in, n_in, out[0], a, &j))
        return oar_error(OAR_ERR_INTERNAL, "fused_elementwise: the avx2 kernel got a program it does not support "
                                           "(dispatch should have asked)");
    for (int i = 0; i < n_in; i++)
        if (j.form[i] == IN_SCALAR)
            for (int l = 0; l < 8; l++) j.bcast[i][l] = j.base[i][0];
    oar_parallel_for(out[0]->numel, OAR_EW_GRAIN, few_range, &j);
    return OAR_OK;
}

static bool few_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_out;
    few_job j;
    return oar_cpu_has_avx2() && out[0]->dtype == OAR_F32 && out[0]->contiguous && plan(in, n_in, out[0], a, &j);
}
#endif

void oar_cpu_register_fused_ew(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    oar_register_kernel(OAR_OP_fused_elementwise, (oar_kernel_entry){.device = OAR_CPU,
                                                                     .dtypes = OAR_DTYPE_BIT(OAR_F32),
                                                                     .impl = "avx2",
                                                                     .priority = 10,
                                                                     .fn = few_avx2,
                                                                     .supports = few_supports});
#endif
}
