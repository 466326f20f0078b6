/* AVX2/FMA layer_norm_backward in f32: one pass per row over grad_out, x and weight that
 * accumulates the row's two sums (kept in double) and the dweight/dbias partial sums, then a
 * second pass over the same row, still in L1, that writes dx. Rows are split into a fixed
 * number of parts (independent of the thread count, so results do not depend on it); each part
 * has its own dweight/dbias partials, summed in part order at the end. With a sixth input
 * (layer_norm_backward_add) the residual gradient is added to each dx as it is written. */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/nn_kernels.h"
#include "kernels/cpu/nn_simd.h"

#include <stdlib.h>
#include <string.h>

#ifdef OAR_NN_SIMD

#define LN_PARTS 8
#define F32(t) ((const float *)oar_tensor_ptr(t))

typedef struct lnb_job {
    const float *g, *x, *w, *mean, *rstd;
    const float *res; /* layer_norm_backward_add: the residual gradient added to dx; else NULL */
    float *dx, *part_w, *part_b; /* part_*: LN_PARTS rows of m partial sums */
    int64_t rows, m, parts;
} lnb_job;

static NN_AVX2 void lnb_row(const lnb_job *j, int64_t r, float *pw, float *pb) {
    const int64_t m = j->m, full = m & ~(int64_t)7, rest = m - full;
    const __m256i tail = nn_tail_mask(rest);
    const float *g = j->g + r * m, *x = j->x + r * m;
    float *dx = j->dx + r * m;
    const float *res = j->res ? j->res + r * m : NULL;
    const __m256 vmean = _mm256_set1_ps(j->mean[r]), vrstd = _mm256_set1_ps(j->rstd[r]), one = _mm256_set1_ps(1.0f);
    nn_dacc s1 = nn_dacc_zero(), s2 = nn_dacc_zero();
    for (int64_t i = 0; i < m; i += 8) {
        bool last = i == full;
        __m256 gv = last ? nn_load_tail(g + i, tail, 0.0f) : _mm256_loadu_ps(g + i);
        __m256 xv = last ? nn_load_tail(x + i, tail, 0.0f) : _mm256_loadu_ps(x + i);
        __m256 wv = !j->w ? one : last ? nn_load_tail(j->w + i, tail, 0.0f) : _mm256_loadu_ps(j->w + i);
        __m256 xh = _mm256_mul_ps(_mm256_sub_ps(xv, vmean), vrstd), gx = _mm256_mul_ps(gv, wv);
        if (last) xh = _mm256_and_ps(xh, _mm256_castsi256_ps(tail));
        nn_dacc_add(&s1, gx);
        nn_dacc_add(&s2, _mm256_mul_ps(gx, xh));
        if (last) {
            _mm256_maskstore_ps(pw + i, tail, _mm256_fmadd_ps(gv, xh, _mm256_maskload_ps(pw + i, tail)));
            _mm256_maskstore_ps(pb + i, tail, _mm256_add_ps(gv, _mm256_maskload_ps(pb + i, tail)));
        } else {
            _mm256_storeu_ps(pw + i, _mm256_fmadd_ps(gv, xh, _mm256_loadu_ps(pw + i)));
            _mm256_storeu_ps(pb + i, _mm256_add_ps(gv, _mm256_loadu_ps(pb + i)));
        }
        if (last && !rest) break;
    }
    const __m256 m1 = _mm256_set1_ps((float)(nn_dacc_sum(s1) / (double)m));
    const __m256 m2 = _mm256_set1_ps((float)(nn_dacc_sum(s2) / (double)m));
    for (int64_t i = 0; i < m; i += 8) {
        bool last = i == full;
        if (last && !rest) break;
        __m256 gv = last ? nn_load_tail(g + i, tail, 0.0f) : _mm256_loadu_ps(g + i);
        __m256 xv = last ? nn_load_tail(x + i, tail, 0.0f) : _mm256_loadu_ps(x + i);
        __m256 wv = !j->w ? one : last ? nn_load_tail(j->w + i, tail, 0.0f) : _mm256_loadu_ps(j->w + i);
        __m256 xh = _mm256_mul_ps(_mm256_sub_ps(xv, vmean), vrstd), gx = _mm256_mul_ps(gv, wv);
        __m256 d = _mm256_mul_ps(vrstd, _mm256_fnmadd_ps(xh, m2, _mm256_sub_ps(gx, m1)));
        if (res) d = _mm256_add_ps(d, last ? nn_load_tail(res + i, tail, 0.0f) : _mm256_loadu_ps(res + i));
        if (last) _mm256_maskstore_ps(dx + i, tail, d);
        else _mm256_storeu_ps(dx + i, d);
    }
}

static void lnb_parts(void *ctx, int64_t begin, int64_t end) {
    const lnb_job *j = ctx;
    for (int64_t p = begin; p < end; p++) {
        float *pw = j->part_w + p * j->m, *pb = j->part_b + p * j->m;
        memset(pw, 0, sizeof(float) * (size_t)j->m);
        memset(pb, 0, sizeof(float) * (size_t)j->m);
        for (int64_t r = p * j->rows / j->parts, e = (p + 1) * j->rows / j->parts; r < e; r++) lnb_row(j, r, pw, pb);
    }
}

oar_status oar_nn_layer_norm_backward_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                          oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)ctx; (void)n_out;
    const oar_tensor *x = in[1];
    int k = (int)a[0].i;
    int64_t m = 1;
    for (int d = x->ndim - k; d < x->ndim; d++) m *= x->shape[d];
    int64_t rows = m ? x->numel / m : 0, parts = rows < LN_PARTS ? rows : LN_PARTS;
    float *dw = (float *)oar_tensor_ptr(out[1]), *db = (float *)oar_tensor_ptr(out[2]);
    if (parts == 0) {
        memset(dw, 0, sizeof(float) * (size_t)m);
        memset(db, 0, sizeof(float) * (size_t)m);
        return OAR_OK;
    }
    float *part = malloc(sizeof(float) * (size_t)(2 * parts * m));
    if (!part) return oar_error(OAR_ERR_OOM, "layer_norm_backward: out of memory");
    lnb_job j = {F32(in[0]), F32(x), in[2] ? F32(in[2]) : NULL, F32(in[3]), F32(in[4]),
                 n_in > 5 ? F32(in[5]) : NULL, (float *)oar_tensor_ptr(out[0]),
                 part, part + parts * m, rows, m, parts};
    oar_parallel_for(parts, 1, lnb_parts, &j);
    for (int64_t i = 0; i < m; i++) { /* parts in order: the same sums whatever the threads */
        double sw = 0, sb = 0;
        for (int64_t p = 0; p < parts; p++) {
            sw += j.part_w[p * m + i];
            sb += j.part_b[p * m + i];
        }
        dw[i] = (float)sw;
        db[i] = (float)sb;
    }
    free(part);
    return OAR_OK;
}

#endif

void oar_cpu_register_norm_backward(void) {
#ifdef OAR_NN_SIMD
    oar_kernel_entry e = {.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32), .impl = "avx2", .priority = 10,
                          .fn = oar_nn_layer_norm_backward_avx2, .supports = oar_nn_dense_f32_ok};
    oar_register_kernel(OAR_OP_layer_norm_backward, e);
#endif
}
