/* The ONNX functions when oar is built without protobuf-c (src/io/onnx is left out): each
 * fails with OAR_ERR_UNSUPPORTED and says how to get them. */
#ifndef OAR_HAVE_PROTOBUF_C
#include "base/base.h"

static oar_status unavailable(const char *who) {
    return oar_error(OAR_ERR_UNSUPPORTED, "%s: oar was built without protobuf-c, so ONNX import and export are left out; "
                                          "install libprotobuf-c-dev and protobuf-c-compiler and rebuild", who);
}

oar_onnx_model *oar_onnx_load(const char *path, const oar_onnx_opts *opts) {
    unavailable("onnx_load");
    return NULL;
}
oar_onnx_model *oar_onnx_load_buffer(const void *data, size_t size, const char *dir, const oar_onnx_opts *opts) {
    unavailable("onnx_load_buffer");
    return NULL;
}
void oar_onnx_free(oar_onnx_model *m) {}
int oar_onnx_num_inputs(const oar_onnx_model *m) { return 0; }
int oar_onnx_num_outputs(const oar_onnx_model *m) { return 0; }
oar_status oar_onnx_input_spec(const oar_onnx_model *m, int i, oar_input_spec *out) { return unavailable("onnx_input_spec"); }
const char *oar_onnx_output_name(const oar_onnx_model *m, int k) { return NULL; }
oar_status oar_onnx_run(oar_onnx_model *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    return unavailable("onnx_run");
}
oar_status oar_onnx_run_values(oar_onnx_model *m, const oar_onnx_value *in, int n_in, oar_onnx_value *out,
                               int n_out) {
    return unavailable("onnx_run_values");
}
void oar_onnx_value_clear(oar_onnx_value *v) {}
int oar_onnx_input_kind(const oar_onnx_model *m, int i) { return -1; }
int oar_onnx_output_kind(const oar_onnx_model *m, int k) { return -1; }
oar_status oar_onnx_value_load(const char *path, int kind, oar_onnx_value *out) { return unavailable("onnx_value_load"); }
int oar_onnx_describe(const oar_onnx_model *m, char *buf, size_t size) { return -1; }
int oar_onnx_dump(const oar_onnx_model *m, char *buf, size_t size) { return -1; }
oar_status oar_onnx_save_program(oar_onnx_model *m, const char *path) { return unavailable("onnx_save_program"); }
oar_status oar_onnx_save(oar_jit *f, const char *path, const oar_onnx_save_opts *opts) { return unavailable("onnx_save"); }
oar_status oar_onnx_save_model(const char *model_path, const char *path, const oar_onnx_save_opts *opts) {
    return unavailable("onnx_save_model");
}
oar_tensor *oar_onnx_tensor_load(const char *path) {
    unavailable("onnx_tensor_load");
    return NULL;
}
#else
typedef int oar_onnx_available; /* ISO C wants a declaration in every file */
#endif
