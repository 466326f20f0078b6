/* oar quantization: affine quantize/dequantize, fake quantization, int8 linear, observers and
 * dynamic post-training quantization (docs/quant.md). Included by oar.h.
 *
 * Quantization parameters are tensors: a 0-d scale (f32) and zero point (i32/i64) quantize per
 * tensor; 1-d ones of size x.shape[axis] per channel. q = clamp(round_half_even(x / scale) +
 * zero_point, qmin, qmax) (torch's map: x times 1/scale in float); x' = (q - zero_point) * scale. */
#ifndef OAR_QUANT_H
#define OAR_QUANT_H

#include "oar.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ops (eager and traced alike) */
/* float -> u8 or i8 (dtype), saturating. */
OAR_API oar_tensor *oar_quantize(oar_tensor *x, oar_tensor *scale, oar_tensor *zero_point, int axis, oar_dtype dtype);
/* u8/i8 -> f32. */
OAR_API oar_tensor *oar_dequantize(oar_tensor *q, oar_tensor *scale, oar_tensor *zero_point, int axis);
/* quantize then dequantize in x's dtype over [quant_min, quant_max]; the gradient passes straight
 * through where the value was not clamped (torch.fake_quantize_per_*_affine). */
OAR_API oar_tensor *oar_fake_quant(oar_tensor *x, oar_tensor *scale, oar_tensor *zero_point, int axis,
                                   int64_t quant_min, int64_t quant_max);
/* fake_quant's backward: grad where x is in range, 0 elsewhere. */
OAR_API oar_tensor *oar_fake_quant_grad(oar_tensor *grad, oar_tensor *x, oar_tensor *scale, oar_tensor *zero_point,
                                        int64_t axis, int64_t quant_min, int64_t quant_max);
/* Learnable-scale fake quantization (LSQ; torch._fake_quantize_learnable_per_tensor_affine): as
 * fake_quant per tensor with the zero point rounded and clamped to [quant_min, quant_max], where
 * scale and zero_point (float, one element each) get gradients: d/dscale is round(x/s) - x/s inside
 * the range and quant_min - z or quant_max - z where clamped, d/dzero_point is -scale where
 * clamped, both summed over x and multiplied by grad_factor (LSQ's 1 / sqrt(numel * quant_max));
 * x's gradient passes straight through inside the range. */
OAR_API oar_tensor *oar_fake_quant_lsq(oar_tensor *x, oar_tensor *scale, oar_tensor *zero_point, int64_t quant_min,
                                       int64_t quant_max, double grad_factor);
/* Its backward: new dx (x's shape), dscale and dzero_point (their shapes). */
OAR_API oar_status oar_fake_quant_lsq_grad(oar_tensor *grad, oar_tensor *x, oar_tensor *scale, oar_tensor *zero_point,
                                           int64_t quant_min, int64_t quant_max, double grad_factor, oar_tensor **dx,
                                           oar_tensor **dscale, oar_tensor **dzero_point);
/* Per-tensor scale (f32 0-d) and zero point (i32 0-d) covering x's range and 0, as torch's
 * MinMaxObserver: symmetric or affine, for u8 or i8. NaN in x is an error. */
OAR_API oar_status oar_choose_qparams(oar_tensor *x, oar_dtype dtype, bool symmetric, oar_tensor **scale,
                                      oar_tensor **zero_point);

typedef struct oar_qlinear_opts {
    bool relu;               /* ReLU in the epilogue */
    oar_dtype out_dtype;     /* OAR_F32 (default: dequantized), OAR_U8 / OAR_I8 (requantized), or OAR_I32:
                              * the raw sums sum_k (x - x_zp) w (no scales, bias, activation or residual) */
    oar_tensor *y_scale;     /* 0-d, with y_zero_point: required for u8/i8 outputs */
    oar_tensor *y_zero_point;
    oar_tensor *residual;    /* f32 of the output's shape, added before the ReLU; may be NULL */
} oar_qlinear_opts;
/* y = act(x_scale * w_scale[n] * sum_k (x - x_zp)[.., k] * w[n, k] + bias[n] + residual), with
 * int32 accumulation. x: u8/i8 [..., K] with 0-d qparams; weight: i8 [N, K], symmetric, w_scale
 * 0-d or [N]; bias f32 [N] or NULL. Exact on every CPU (no 16-bit saturation). */
OAR_API oar_tensor *oar_qlinear(oar_tensor *x, oar_tensor *x_scale, oar_tensor *x_zero_point, oar_tensor *weight,
                                oar_tensor *w_scale, oar_tensor *bias, const oar_qlinear_opts *opts);

/* The same as a convolution on NCHW data (groups and depthwise included): x u8/i8 [N, C, H, W]
 * with 0-d qparams, weight i8 [out, in / groups, kh, kw] (symmetric), w_scale 0-d or [out], bias
 * f32 [out]; opts' residual is f32 [N, out, oh, ow]. conv as oar_conv2d's (NULL: stride 1). */
OAR_API oar_tensor *oar_qconv2d(oar_tensor *x, oar_tensor *x_scale, oar_tensor *x_zero_point, oar_tensor *weight,
                                oar_tensor *w_scale, oar_tensor *bias, const oar_conv_opts *conv,
                                const oar_qlinear_opts *opts);

/* y[i] = table[code of x[i]]: x u8 or i8, table 256 u8 or i8 entries in code order (i8: -128..127),
 * y of the table's dtype. Any elementwise function of one quantized tensor as a byte lookup (ONNX's
 * QLinearSigmoid and QLinearLeakyRelu run so). */
OAR_API oar_tensor *oar_qlut(oar_tensor *x, oar_tensor *table);

/* ---- observers: collect statistics of tensors, then give scale and zero point */
typedef struct oar_observer oar_observer;
typedef struct oar_observer_opts {
    oar_dtype dtype;     /* OAR_U8 (default when 0 is given: see below) or OAR_I8 */
    bool symmetric;      /* zero point 0 (i8) or 128 (u8) */
    bool per_channel;    /* one scale per index of axis */
    int axis;
    double momentum;     /* moving_average: weight of the old value; 0 means 0.9 */
    double percentile;   /* percentile: in (0, 100]; 0 means 99.99 */
    int bins;            /* histogram observers: 0 means 2048 */
    bool reduce_range;   /* 7-bit ranges, torch's reduce_range: u8 [0, 127], i8 [-64, 63] (not with u8
                            symmetric, which torch refuses too) */
} oar_observer_opts;
/* kind: "minmax", "moving_average" (of min and max, PaddleSlim's moving_average_abs_max when
 * symmetric), "percentile", "kl" (entropy, as TensorRT), "mse". opts may be NULL (u8, affine,
 * per tensor). dtype 0 (OAR_F32) is read as u8. NULL with a message for an unknown kind. */
OAR_API oar_observer *oar_observer_create(const char *kind, const oar_observer_opts *opts);
/* The registered kinds, in order; returns their count (names may be NULL). */
OAR_API int oar_observer_kinds(const char **names, int cap);
/* Records the values of x (float). NaN or Inf fails with a message and records nothing. */
OAR_API oar_status oar_observer_observe(oar_observer *o, oar_tensor *x);
/* New tensors: scale (f32) and zero point (i32), 0-d or [channels]. Fails when nothing was observed. */
OAR_API oar_status oar_observer_qparams(oar_observer *o, oar_tensor **scale, oar_tensor **zero_point);
OAR_API void oar_observer_free(oar_observer *o);

/* ---- dynamic post-training quantization: int8 weights, activations quantized per batch */
typedef struct oar_quant_layer {
    char name[128];          /* dotted path of the module */
    char type[32];           /* "Linear", "Conv2d", "Embedding", "LSTM" or "GRU" */
    int64_t weights;         /* number of weights quantized */
    float scale_min, scale_max;
    double weight_sqnr_db;   /* 10 log10(|w|² / |w - dequantize(quantize(w))|²); LSTM/GRU: their worst matrix */
    double output_sqnr_db;   /* oar_quantize_static_model: the layer's output in the int8 program against
                                the f32 one over the calibration batches (earlier layers' errors included) */
} oar_quant_layer;
typedef struct oar_quant_dynamic_opts {
    bool per_tensor;         /* one weight scale per layer instead of one per output row */
    const char *const *skip; /* NULL-terminated module paths to keep in fp32 ("" is m itself); may be NULL */
    bool embeddings;         /* also Embedding tables: i8 rows, one symmetric scale per row */
    int weight_bits;         /* 8 (0 means 8), or 7: Linear, LSTM and GRU weights within [-63, 63], which
                                CPUs without VNNI multiply exactly with vpmaddubsw (oar_quant_fast_weight_bits;
                                Embedding tables, which are looked up, not multiplied, keep 8) */
} oar_quant_dynamic_opts;
/* Rewrites every Linear of m in place: weight becomes an i8 buffer "weight" with f32
 * "weight_scale" (symmetric), and forward quantizes its input to u8 per batch
 * (oar_choose_qparams) and runs qlinear. Every LSTM and GRU likewise: weight_ih_l{k} and
 * weight_hh_l{k} become i8 with f32 weight_ih_scale_l{k} / weight_hh_scale_l{k}, the gate
 * products run in qlinear with the input sequence and each step's h quantized per call, the
 * nonlinearities in f32 (torch's quantized LSTM/GRU, with 8-bit activations; docs/quant.md).
 * With opts->embeddings, Embedding tables too (their forward looks up i8 rows and multiplies by
 * the rows' scales). layers (may be NULL) receives up to cap entries;
 * *n_layers (may be NULL) the number converted. Fails without changing m when m is training,
 * has no Linear, LSTM or GRU to convert, or one of them has weights that are not f32 on the CPU
 * (skip it to keep it in fp32). */
OAR_API oar_status oar_quantize_dynamic(oar_module *m, const oar_quant_dynamic_opts *opts, oar_quant_layer *layers,
                                        int cap, int *n_layers);

/* ---- static post-training quantization: int8 weights and activations with calibrated scales */
typedef struct oar_quant_static_opts {
    const char *observer;            /* activation observer kind (oar_observer_create); NULL: "minmax" */
    oar_observer_opts observer_opts; /* its options (per tensor; dtype is u8 in this version) */
    bool keep_first, keep_last;      /* keep the first / last Linear or Conv2d (module order) in fp32 */
    const char *const *skip;         /* NULL-terminated module paths kept in fp32; may be NULL */
    int weight_bits;                 /* 8 (0 means 8), or 7: weights within [-63, 63], which CPUs without
                                        VNNI multiply exactly on oneDNN's fast int8 code (programs only) */
    bool int8_residual;              /* programs: an add [+ relu] of a layer's output whose sum feeds int8
                                        layers becomes qadd of u8 codes (no f32 block output; other rounding
                                        points); default: residual additions in f32, in the epilogues */
} oar_quant_static_opts;
/* The weight_bits this CPU (within oar's ISA cap) runs int8 convolutions and linears fastest
 * with: 8 with VNNI or AMX, which multiply any int8 data exactly; 7 with AVX2 and no VNNI
 * (vpmaddubsw); 8 below AVX2 (the reference kernels, exact at any width). oar quantize's
 * default (static, qat and dynamic). */
OAR_API int oar_quant_fast_weight_bits(void);
/* Runs the n_batches calibration inputs through m (eval mode, no gradients) observing each
 * target layer's input, then rewrites every Linear and Conv2d not kept in fp32: i8 weight
 * (symmetric, per output channel) and "weight_scale", the input's fixed "input_scale" and
 * "input_zero_point" (u8), and a forward of quantize + qlinear/qconv2d giving f32. layers gets
 * per layer the weight SQNR and, in scale_min/scale_max, the input scale. Nothing changes when
 * calibration fails (no batches, NaN/Inf in an activation, a layer never reached). */
OAR_API oar_status oar_quantize_static(oar_module *m, oar_tensor *const *batches, int n_batches,
                                       const oar_quant_static_opts *opts, oar_quant_layer *layers, int cap,
                                       int *n_layers);

/* ---- static post-training quantization of a compiled program (an exported model) */
/* Loads the fp32 model at model_path (oar_jit_save's files; exported with the strategy below so
 * that its conv2d and linear nodes are not fused away), folds inference-mode BatchNorm into the
 * conv before it, runs the calibration batches (inputs of the model's one input) with each
 * conv2d / linear input observed as opts says, rewrites those layers to quantize + qconv2d /
 * qlinear (i8 weights per output channel, u8 activations) and saves the int8 model at out_path,
 * which the predictor runs with its activations in int8 between layers (fuse_quant). Ops other
 * than conv2d and linear (softmax, layer_norm, ...) stay fp32; keep_first / keep_last / skip (a
 * layer is named by its weight parameter without ".weight") keep layers fp32. layers gets per
 * layer the weight SQNR, the input scale (scale_min) and the output SQNR. Nothing is written
 * when anything fails. */
OAR_API oar_status oar_quantize_static_model(const char *model_path, const char *out_path, oar_tensor *const *batches,
                                             int n_batches, const oar_quant_static_opts *opts,
                                             oar_quant_layer *layers, int cap, int *n_layers);
/* The build strategy to export a model with before oar_quantize_static_model: the passes that
 * fuse conv2d and linear into other ops (and fold BN into expressions) off. */
OAR_API void oar_quant_export_strategy(oar_build_strategy *s);

/* ---- quantization-aware training: train through fake quantization, then convert to int8 */
typedef struct oar_qat_opts {
    double momentum;                 /* activation scale average: weight of the old value; 0 means 0.9 */
    bool keep_first, keep_last;      /* keep the first / last Linear or Conv2d (module order) in fp32 */
    const char *const *skip;         /* NULL-terminated module paths kept in fp32; may be NULL */
    int weight_bits;                 /* 8 (0 means 8), or 7: weights fake-quantized with scale max|w[c]| / 63
                                        (within [-63, 63]), and convert writes the 7-bit program (as static's) */
    bool reduce_range;               /* 7-bit input range (torch's reduce_range): u8 [0, 127], zero point 64,
                                        scale = the abs-max average / 63.5 */
    bool fuse_bn;                    /* ConvBn-fused QAT (torch's ConvBn2d): a Conv2d followed among its parent's
                                        children by a BatchNorm2d of its output channels (the pair convert folds)
                                        fake-quantizes the folded weight w * gamma / sqrt(running_var + eps) and
                                        divides its output by that factor before the BN; the BN trains as usual */
} oar_qat_opts;
/* Rewrites every Linear and Conv2d of m not kept in fp32, in place, into a layer that runs
 * fake_quant on its weight (symmetric i8 per output channel, scale max|w[c]| / 127.5 from the
 * current weight at every call) and on its input (symmetric u8, zero point 128, the scale a
 * moving average of the batches' abs-max scales kept in the buffers "act_scale_sum" and
 * "act_scale_count", PaddleSlim's moving_average_abs_max: updated in training mode, used in
 * evaluation mode). Parameters keep their names, so an optimizer made before or after works,
 * and the layers train eagerly and in a compiled step (oar_jit_to_static) alike. NaN/Inf in a
 * layer's input during training is an error. Fails without changing m when m is already
 * prepared or has nothing to quantize. *n_layers (may be NULL) gets the number of layers. */
OAR_API oar_status oar_qat_prepare(oar_module *m, const oar_qat_opts *opts, int *n_layers);

/* Makes each prepared layer's input scale learnable (LSQ): a parameter "act_scale" initialized from
 * its moving average (so call it after some QAT steps), trained from then on through
 * fake_quant_lsq with LSQ's gradient scale 1 / sqrt(features per sample * 255); the zero point
 * stays 128. Make (or remake) the optimizer afterwards so that it holds the new parameters.
 * Fails, changing nothing, when m was not prepared, a layer never trained, or it was called before. */
OAR_API oar_status oar_qat_learn_scales(oar_module *m, int *n_layers);

/* ConvBn-fused QAT (prepared with fuse_bn): the fused BatchNorms stop updating their running statistics
 * and normalize with them from now on, in training mode too (torch's freeze_bn_stats; often after a
 * few epochs). Fails, changing nothing, when m has no fused BatchNorm. *n_layers gets how many. */
OAR_API oar_status oar_qat_freeze_bn(oar_module *m, int *n_layers);

typedef struct oar_qat_convert_opts {
    const char *input_name, *output_name; /* names in the exported model; NULL: "input0", "output0" */
} oar_qat_convert_opts;
/* Writes the int8 program of a prepared (and trained) m at out_path (oar_jit_save's files, for the
 * predictor and `oar infer`): m is exported in eval mode with its layers plain (batches[0] gives the
 * input's shape, its first dim dynamic) and rewritten as oar_quantize_static_model does (BN folded,
 * i8 weights per output channel, quantize + qconv2d / qlinear), with the learned activation scales
 * in place of calibration. The batches give the output SQNR of layers (as for static PTQ). m is
 * left prepared (training may go on). Fails, writing nothing, when m was never prepared or a
 * layer never trained. */
OAR_API oar_status oar_qat_convert(oar_module *m, oar_tensor *const *batches, int n_batches, const char *out_path,
                                   const oar_qat_convert_opts *opts, oar_quant_layer *layers, int cap,
                                   int *n_layers);
/* The learned activation scale of each prepared layer (module order): names[i] the module path,
 * scales[i] = act_scale_sum / act_scale_count, or the parameter act_scale after
 * oar_qat_learn_scales (zero point 128). */
OAR_API oar_status oar_qat_scales(oar_module *m, char (*names)[128], float *scales, int cap, int *n_layers);

/* SQNR in dB of approx against ref (same shape, float): 10 log10(sum ref² / sum (ref - approx)²);
 * +inf when equal. */
OAR_API oar_status oar_sqnr(oar_tensor *ref, oar_tensor *approx, double *db);

#ifdef __cplusplus
}
#endif
#endif /* OAR_QUANT_H */
