/* Classification accuracy, written with ops (topk, eq, sum, mean) so it runs eagerly and in a
 * traced function alike: the fraction of samples whose target class is among the k largest
 * logits. topk keeps the lowest index first among ties, so k = 1 is argmax == target as torch
 * computes it ((logits.argmax(1) == y).float().mean()). */
#include "tensor/tensor.h"

static bool is_int(oar_dtype dt) { return dt == OAR_I64 || dt == OAR_I32 || dt == OAR_I8 || dt == OAR_U8; }

static oar_status check(oar_tensor *logits, oar_tensor *target, int64_t k) {
    const char *who = "accuracy";
    if (!logits || !target) {
        if (oar_last_status() != OAR_OK) return oar_last_status(); /* keep the error that made it NULL */
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected logits and target, got NULL", who);
    }
    if (!OAR_HANDLE_OK(logits)) return oar_handle_error(who, "logits", -1, logits);
    if (!OAR_HANDLE_OK(target)) return oar_handle_error(who, "target", -1, target);
    char sl[160], st[160];
    oar_format_shape(logits->shape, logits->ndim, sl, sizeof sl);
    oar_format_shape(target->shape, target->ndim, st, sizeof st);
    if (!oar_dtypes[logits->dtype].is_float)
        return oar_error(OAR_ERR_DTYPE, "%s: expected floating logits, got %s", who, oar_dtype_name(logits->dtype));
    if (!is_int(target->dtype))
        return oar_error(OAR_ERR_DTYPE, "%s: expected integer class indices as target, got %s", who,
                         oar_dtype_name(target->dtype));
    if (logits->ndim != 2 || target->ndim != 1 || target->shape[0] != logits->shape[0])
        return oar_error(OAR_ERR_SHAPE, "%s: expected logits [N, C] and target [N], got %s and %s", who, sl, st);
    if (k < 1 || k > logits->shape[1])
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected 1 <= k <= C = %lld (the classes), got k = %lld", who,
                         (long long)logits->shape[1], (long long)k);
    if (logits->shape[0] == 0)
        return oar_error(OAR_ERR_SHAPE, "%s: expected at least one sample, got logits %s", who, sl);
    return OAR_OK;
}

oar_tensor *oar_accuracy(oar_tensor *logits, oar_tensor *target, int64_t k) {
    if (check(logits, target, k) != OAR_OK) return NULL;
    oar_tensor *r = NULL;
    bool grad = oar_set_grad_enabled(false);
    oar_scope_begin();
    oar_tensor *values = NULL, *idx = NULL;
    if (oar_topk(logits, k, 1, true, false, &values, &idx) == OAR_OK) {
        oar_tensor *tgt = target->dtype == OAR_I64 ? target : oar_cast(target, OAR_I64);
        oar_tensor *hit = oar_eq(idx, oar_unsqueeze(tgt, 1));                          /* [N, k] */
        oar_tensor *per = oar_sum(hit, (const int[]){1}, 1, false);                   /* i64 [N]: 0 or 1 */
        r = oar_keep(oar_mean(oar_cast(per, OAR_F64), NULL, 0, false));
    }
    oar_release(values);
    oar_release(idx);
    oar_scope_end();
    oar_set_grad_enabled(grad);
    return r;
}
