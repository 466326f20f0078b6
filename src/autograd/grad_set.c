/* oar_grad_set: a leaf's gradient assigned from outside backward (torch's `p.grad = g`). */
#include "autograd/autograd.h"

oar_status oar_grad_set(oar_tensor *t, oar_tensor *grad) {
    OAR_CHECK_HANDLE("grad_set", t, oar_last_status());
    if (!t) return oar_error(OAR_ERR_INVALID_ARG, "grad_set: expected a tensor, got NULL");
    if (!grad) {
        oar_zero_grad(t);
        return OAR_OK;
    }
    OAR_CHECK_HANDLE("grad_set", grad, oar_last_status());
    if (oar_active_trace)
        return oar_error(OAR_ERR_STATE, "grad_set: a gradient cannot be assigned while tracing (it would be "
                                        "assigned once, at tracing, not at every run); assign it outside the "
                                        "compiled function, or let backward compute it");
    if (t->grad_fn)
        return oar_error(OAR_ERR_STATE, "grad_set: expected a leaf tensor, got one computed by an op (its "
                                        "gradient is not kept); assign the gradient of the leaf it came from");
    bool same_shape = t->ndim == grad->ndim;
    for (int d = 0; same_shape && d < t->ndim; d++) same_shape = t->shape[d] == grad->shape[d];
    if (!same_shape) {
        char want[160], got[160];
        oar_format_shape(t->shape, t->ndim, want, sizeof want);
        oar_format_shape(grad->shape, grad->ndim, got, sizeof got);
        return oar_error(OAR_ERR_SHAPE, "grad_set: assigned grad has data of a different size: expected %s (the "
                                        "tensor's shape), got %s",
                         want, got);
    }
    if (grad->dtype != t->dtype)
        return oar_error(OAR_ERR_DTYPE, "grad_set: assigned grad has data of a different type: expected %s (the "
                                        "tensor's dtype), got %s; cast it first",
                         oar_dtype_name(t->dtype), oar_dtype_name(grad->dtype));
    if (grad->device != t->device)
        return oar_error(OAR_ERR_INVALID_ARG, "grad_set: assigned grad is on a different device: expected %s, got "
                                              "%s; move it with oar_to first",
                         t->device == OAR_CUDA ? "cuda" : "cpu", grad->device == OAR_CUDA ? "cuda" : "cpu");
    if (!grad->storage)
        return oar_error(OAR_ERR_STATE, "grad_set: expected a tensor with data, got a symbolic one");
    /* backward adds into .grad in place, which needs a dense row-major buffer */
    oar_tensor *g = grad->contiguous ? oar_retain(grad) : oar_tensor_contiguous_copy(grad);
    if (!g) return oar_last_status() != OAR_OK ? oar_last_status() : OAR_ERR_OOM;
    oar_tensor_unref(t->grad);
    t->grad = g;
    return OAR_OK;
}
