/* The AMP kernel tests' oracle for kernels that read bf16/f16 directly: the op on the low inputs
 * against the same op on f32 copies with its outputs rounded (the via-f32 path), bit for bit,
 * and the name of the kernel that ran. */
#ifndef OAR_TESTS_AMP_VIA_F32_UTIL_H
#define OAR_TESTS_AMP_VIA_F32_UTIL_H

#include "kernels/cpu/cpu_kernels.h"
#include "test_util.h"

#include <stdio.h>

static inline const char *amp_kernel_of(oar_op_id op, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                        int n_out, const oar_attr *a) {
    const oar_kernel_entry *k = oar_select_kernel(op, in, n_in, out, n_out, a);
    oar_clear_error();
    return k ? k->impl : "none";
}

/* the avx2-half kernels run wherever the cap has AVX2 (f16 also needs F16C, which every AVX2
 * CPU this runs on has) */
static inline bool amp_half_expected(void) { return oar_cpu_has_avx2(); }

/* op on low inputs against the f32 op on widened copies (f32 inputs as they are), outputs
 * rounded to their dtype: the number of differing outputs; *impl: the kernel of the low call */
static inline int against_via_f32(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *a, int n_out,
                                  const char **impl) {
    oar_tensor *out[4], *ref[4], *wide[8];
    int n = n_out, diffs = 0;
    CHECK(oar_op_call(op, in, n_in, a, out, &n) == OAR_OK);
    *impl = amp_kernel_of(op, in, n_in, out, n_out, a);
    for (int i = 0; i < n_in; i++) wide[i] = in[i] && oar_dtype_of(in[i]) != OAR_BOOL ? oar_cast(in[i], OAR_F32) : in[i];
    n = n_out;
    CHECK(oar_op_call(op, wide, n_in, a, ref, &n) == OAR_OK);
    for (int i = 0; i < n_out; i++) {
        bool same = t_same_bits(out[i], oar_cast(ref[i], oar_dtype_of(out[i])));
        if (!same) fprintf(stderr, "%s output %d differs from via-f32\n", oar_op_table[op]->name, i);
        diffs += !same;
    }
    for (int i = 0; i < n_out; i++) { /* oar_op_call's outputs are the caller's, not the scope's */
        oar_release(out[i]);
        oar_release(ref[i]);
    }
    return diffs;
}

#endif
