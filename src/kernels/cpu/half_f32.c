/* f16/bf16 on CPUs whose fast kernels are f32: storage stays half width, compute runs in f32.
 *   - Conversions: bf16 by shifts (round to nearest even when narrowing, NaN kept quiet), f16
 *     with F16C where the ISA cap allows; large arrays split over the pool. They are the `cast`
 *     op's kernel between f32 and f16/bf16 (autocast's casts) and the two ends of:
 *   - via-f32 kernels: for every op that has a fast f32 CPU kernel but none for f16/bf16, its
 *     low-precision inputs are widened, the op's best f32 kernel runs, and the results are
 *     rounded back (inputs it writes in place too). Without them such ops would run the portable
 *     reference loops, 10-100x slower: the slow path users meet in other frameworks' CPU AMP.
 * Results equal the reference's rounding of the exact value except where f32 and double
 * accumulation round differently, within one unit of the low dtype (the sweep checks each at
 * bf16/f16 tolerance). */
#include "kernels/cpu/bf16_native.h"
#include "kernels/cpu/cpu_kernels.h"

#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define HALF_X86 1
#endif

#define CVT_GRAIN ((int64_t)1 << 15)

static inline float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* ---- conversion loops (branch-free, so the compiler vectorizes them) */
static void bf16_to_f32(float *d, const uint16_t *s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = u2f((uint32_t)s[i] << 16);
}

static void f32_to_bf16(uint16_t *d, const float *s, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t x = f2u(s[i]);
        uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16, quiet = (x >> 16) | 0x0040u;
        d[i] = (uint16_t)((x & 0x7FFFFFFFu) > 0x7F800000u ? quiet : rounded);
    }
}

#ifdef HALF_X86
/* bf16 by integer shifts in vectors: the same bits as the loops above on every path (AVX-512's
 * own vcvtneps2bf16 flushes denormals to zero, so the ISA paths would disagree). */
__attribute__((target("avx2"))) static void bf16_to_f32_avx2(float *d, const uint16_t *s, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
        _mm256_storeu_si256((__m256i *)(d + i), _mm256_slli_epi32(w, 16));
    }
    bf16_to_f32(d + i, s + i, n - i);
}
__attribute__((target("avx2"))) static void f32_to_bf16_avx2(uint16_t *d, const float *s, int64_t n) {
    const __m256i bias = _mm256_set1_epi32(0x7FFF), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x0040),
                  abs = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h[2];
        for (int k = 0; k < 2; k++) {
            __m256i x = _mm256_loadu_si256((const __m256i *)(s + i + 8 * k));
            __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), one); /* ties to even */
            __m256i r = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(bias, odd)), 16);
            __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs), inf);
            h[k] = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(x, 16), quiet), nan);
        }
        /* packus works per 128-bit lane: restore the order */
        __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(h[0], h[1]), 0xD8);
        _mm256_storeu_si256((__m256i *)(d + i), packed);
    }
    f32_to_bf16(d + i, s + i, n - i);
}
__attribute__((target("avx512f,avx512bw"))) static void bf16_to_f32_avx512(float *d, const uint16_t *s, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(s + i)));
        _mm512_storeu_si512(d + i, _mm512_slli_epi32(w, 16));
    }
    bf16_to_f32(d + i, s + i, n - i);
}
__attribute__((target("avx512f,avx512bw"))) static void f32_to_bf16_avx512(uint16_t *d, const float *s, int64_t n) {
    const __m512i bias = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x0040),
                  abs = _mm512_set1_epi32(0x7FFFFFFF), inf = _mm512_set1_epi32(0x7F800000);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i x = _mm512_loadu_si512(s + i);
        __m512i odd = _mm512_and_si512(_mm512_srli_epi32(x, 16), one);
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(bias, odd)), 16);
        __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, abs), inf);
        r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(x, 16), quiet);
        _mm256_storeu_si256((__m256i *)(d + i), _mm512_cvtepi32_epi16(r));
    }
    f32_to_bf16(d + i, s + i, n - i);
}

__attribute__((target("avx,f16c"))) static void f16_to_f32_f16c(float *d, const uint16_t *s, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++) d[i] = oar_f16_to_f32(s[i]);
}
__attribute__((target("avx,f16c"))) static void f32_to_f16_f16c(uint16_t *d, const float *s, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) d[i] = oar_f32_to_f16(s[i]);
}
#endif

static bool use_f16c(void) {
#ifdef HALF_X86
    static int has = -1;
    if (has < 0) has = strstr(oar_cpu_flags(), "f16c") != NULL;
    return has && oar_cpu_has_avx2();
#else
    return false;
#endif
}

typedef struct cvt_job {
    void *dst;
    const void *src;
    oar_dtype half;
    bool widen; /* half -> f32, else f32 -> half */
} cvt_job;

static void cvt_range(void *ctx, int64_t lo, int64_t hi) {
    const cvt_job *j = ctx;
    int64_t n = hi - lo;
    if (j->widen) {
        float *d = (float *)j->dst + lo;
        const uint16_t *s = (const uint16_t *)j->src + lo;
        if (j->half == OAR_BF16) {
#ifdef HALF_X86
            if (oar_cpu_has_avx512()) bf16_to_f32_avx512(d, s, n);
            else if (oar_cpu_has_avx2()) bf16_to_f32_avx2(d, s, n);
            else
#endif
                bf16_to_f32(d, s, n);
        }
#ifdef HALF_X86
        else if (use_f16c()) f16_to_f32_f16c(d, s, n);
#endif
        else
            for (int64_t i = 0; i < n; i++) d[i] = oar_f16_to_f32(s[i]);
    } else {
        uint16_t *d = (uint16_t *)j->dst + lo;
        const float *s = (const float *)j->src + lo;
        if (j->half == OAR_BF16) {
#ifdef HALF_X86
            if (oar_cpu_has_avx512()) f32_to_bf16_avx512(d, s, n);
            else if (oar_cpu_has_avx2()) f32_to_bf16_avx2(d, s, n);
            else
#endif
                f32_to_bf16(d, s, n);
        }
#ifdef HALF_X86
        else if (use_f16c()) f32_to_f16_f16c(d, s, n);
#endif
        else
            for (int64_t i = 0; i < n; i++) d[i] = oar_f32_to_f16(s[i]);
    }
}

static void convert(void *dst, const void *src, int64_t n, oar_dtype half, bool widen) {
    cvt_job j = {dst, src, half, widen};
    if (n >= 2 * CVT_GRAIN) oar_parallel_for(n, CVT_GRAIN, cvt_range, &j);
    else cvt_range(&j, 0, n);
}

/* dst <- src between contiguous tensors of equal numel, one f32 and the other f16/bf16. */
void oar_cpu_convert_half(oar_tensor *dst, const oar_tensor *src) {
    bool widen = dst->dtype == OAR_F32;
    convert(oar_tensor_ptr(dst), oar_tensor_ptr(src), dst->numel, widen ? src->dtype : dst->dtype, widen);
}

void oar_cpu_f32_to_half(void *dst, const float *src, int64_t n, oar_dtype half) { convert(dst, src, n, half, false); }
void oar_cpu_half_to_f32(float *dst, const void *src, int64_t n, oar_dtype half) { convert(dst, src, n, half, true); }

static bool is_half(oar_dtype dt) { return dt == OAR_F16 || dt == OAR_BF16; }

/* ---- cast between f32 and f16/bf16 */
static bool cast_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in, (void)n_out, (void)a;
    oar_dtype s = in[0]->dtype, d = out[0]->dtype;
    return in[0]->contiguous && ((s == OAR_F32 && is_half(d)) || (is_half(s) && d == OAR_F32));
}

static oar_status cast_half(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *a) {
    (void)ctx, (void)n_in, (void)n_out, (void)a;
    oar_cpu_convert_half(out[0], in[0]);
    return OAR_OK;
}

/* ---- amp_sync_param(param, master): O2's rounding of an f32 master into its f16/bf16 parameter */
static bool sync_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in, (void)out, (void)n_out, (void)a;
    return in[0]->contiguous && in[1]->contiguous && is_half(in[0]->dtype) && in[1]->dtype == OAR_F32 &&
           in[0]->numel == in[1]->numel;
}

static oar_status sync_half(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *a) {
    (void)ctx, (void)n_in, (void)out, (void)n_out, (void)a;
    oar_cpu_convert_half(in[0], in[1]);
    in[0]->storage->version++; /* written in place, as the reference does */
    return OAR_OK;
}

/* ---- via-f32 kernels */
static oar_tensor *widened(const oar_tensor *t) {
    oar_tensor *w = oar_tensor_new(OAR_F32, t->shape, t->ndim);
    if (w) {
        if (t->contiguous) oar_cpu_convert_half(w, t);
        else oar_tensor_copy_strided(w, t);
    }
    return w;
}

static oar_status via_f32(oar_op_id op, const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                          int n_out, const oar_attr *attrs) {
    const oar_op_def *d = oar_op_table[op];
    oar_tensor *win[OAR_MAX_INPUTS] = {0}, *wout[OAR_MAX_OUTPUTS] = {0}, *args_in[OAR_MAX_INPUTS],
               *args_out[OAR_MAX_OUTPUTS];
    oar_status st = OAR_OK;
    memcpy(args_in, in, sizeof(*in) * (size_t)n_in);
    memcpy(args_out, out, sizeof(*out) * (size_t)n_out);
    for (int i = 0; i < n_in && st == OAR_OK; i++) {
        if (in[i] && is_half(in[i]->dtype)) {
            if (!(win[i] = widened(in[i]))) st = OAR_ERR_OOM;
            args_in[i] = win[i];
        }
    }
    for (int o = 0; o < n_out && st == OAR_OK; o++) {
        if (is_half(out[o]->dtype)) {
            if (!(wout[o] = oar_tensor_new(OAR_F32, out[o]->shape, out[o]->ndim))) st = OAR_ERR_OOM;
            args_out[o] = wout[o];
        }
    }
    bool in_f32 = true; /* whether the results are in the f32 copies */
    if (st == OAR_OK) {
        const oar_kernel_entry *k = oar_select_kernel(op, args_in, n_in, args_out, n_out, attrs);
        if (k) {
            st = k->fn(ctx, args_in, n_in, args_out, n_out, attrs);
        } else { /* no f32 kernel takes these inputs: the reference on the originals */
            oar_clear_error();
            in_f32 = false;
            st = d->reference(ctx, in, n_in, out, n_out, attrs);
        }
    }
    for (int o = 0; o < n_out && st == OAR_OK && in_f32; o++)
        if (wout[o]) oar_cpu_convert_half(out[o], wout[o]);
    for (int i = 0; i < n_in && st == OAR_OK && in_f32; i++)
        if (win[i] && i < 32 && ((d->mutated_inputs >> i) & 1u)) oar_tensor_copy_strided(in[i], win[i]);
    for (int i = 0; i < OAR_MAX_INPUTS; i++) oar_tensor_unref(win[i]);
    for (int o = 0; o < OAR_MAX_OUTPUTS; o++) oar_tensor_unref(wout[o]);
    return st;
}

/* One entry point per op (a kernel is not told its op). */
#define OAR_OP(name)                                                                                                  \
    static oar_status via_f32_##name(const oar_kctx *c, oar_tensor *const *i, int ni, oar_tensor *const *o, int no, \
                                     const oar_attr *a) {                                                           \
        return via_f32(OAR_OP_##name, c, i, ni, o, no, a);                                                          \
    }
#include "ops/ops.def"
#undef OAR_OP

static const oar_kernel_fn via_f32_fns[OAR_OP_COUNT] = {
#define OAR_OP(name) via_f32_##name,
#include "ops/ops.def"
#undef OAR_OP
};

/* Whether op has a CPU kernel other than the reference for dtype dt on every CPU and for every
 * input of that dtype (native bf16 kernels run only on some CPUs, mixed ones only with f32
 * parameters). */
static bool has_fast(oar_op_id op, oar_dtype dt) {
    const oar_kernel_entry *ks;
    int nk = oar_op_kernels_so_far(op, &ks);
    for (int k = 0; k < nk; k++)
        if (ks[k].device == OAR_CPU && strcmp(ks[k].impl, "reference") != 0 &&
            strcmp(ks[k].impl, OAR_IMPL_BF16_NATIVE) != 0 && strcmp(ks[k].impl, OAR_IMPL_BF16_STORAGE) != 0 &&
            strcmp(ks[k].impl, OAR_IMPL_HALF_MIXED) != 0 &&
            strcmp(ks[k].impl, OAR_IMPL_HALF_PARTIAL) != 0 &&
            (ks[k].dtypes & OAR_DTYPE_BIT(dt)))
            return true;
    return false;
}

void oar_cpu_register_half_f32(void) {
    oar_register_kernel(OAR_OP_cast, (oar_kernel_entry){.device = OAR_CPU, .impl = "convert", .priority = 30,
                                                        .dtypes = OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F16) |
                                                                  OAR_DTYPE_BIT(OAR_BF16),
                                                        .fn = cast_half, .supports = cast_supports});
    oar_register_kernel(OAR_OP_amp_sync_param, (oar_kernel_entry){.device = OAR_CPU, .impl = "convert", .priority = 30,
                                                                  .dtypes = OAR_DTYPE_BIT(OAR_F32), .fn = sync_half,
                                                                  .supports = sync_supports});
    oar_cpu_register_half_binary(); /* before the loop below, which skips what it covers only in part */
    oar_cpu_register_half_gelu();
    /* after every other backend: only ops left without a low-precision kernel get one */
    for (int op = 0; op < OAR_OP_COUNT; op++) {
        const oar_op_def *d = oar_op_table[op];
        if ((d->flags & (OAR_OPF_VIEW | OAR_OPF_CONTROL | OAR_OPF_TO_DEVICE)) || !has_fast((oar_op_id)op, OAR_F32))
            continue;
        /* batch_norm_act at f16/bf16 rounds after the normalization and after the add, as the
         * ops it fuses do (so compiled steps keep eager's bits); its f32 kernel on widened
         * inputs would round once at the end. Its mixed kernel (nn_norm.c) rounds where the
         * definition does; elsewhere the reference runs. */
        if (op == OAR_OP_batch_norm_act) continue;
        uint32_t dts = 0;
        for (oar_dtype dt = OAR_F16; dt <= OAR_BF16; dt++)
            if ((d->ref_dtypes & OAR_DTYPE_BIT(dt)) && !has_fast((oar_op_id)op, dt)) dts |= OAR_DTYPE_BIT(dt);
        if (dts)
            oar_register_kernel((oar_op_id)op, (oar_kernel_entry){.device = OAR_CPU, .impl = "via-f32", .priority = 5,
                                                                  .dtypes = dts, .fn = via_f32_fns[op]});
    }
}
