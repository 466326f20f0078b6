"""torchaudio's model files (Debian's python3-torchaudio 0.13), unmodified, on oar through the torch
switch, against real torch 1.13, as test_torchvision.py does for torchvision: torch builds each
model at a small size and runs it; another interpreter builds the same model from the same file on
oar, takes torch's weights, and must give the same output and parameter gradients. In float64:
with random weights some of these models are ill-conditioned (wav2vec2's small configuration: torch's
own f32 and f64 gradients of its first GroupNorm differ several times over), so f32 would compare
rounding, not the implementations. torchaudio's
C++ extension cannot load into oar; the switch imports the package as if it had been built
without it (_compat/extensions.py), and its model files are pure Python.

Skipped under the sanitizers (seconds of model work; the interpreter is not instrumented)."""
import os

import pytest

from conftest import np
from model_files_util import check_model, run_oar_side, torch_side


def cases(torch):
    """name -> (kwargs, inputs): every model of torchaudio.models at a small size."""
    n = torch.randn
    return {
        "Wav2Letter": ({"num_classes": 10, "input_type": "waveform", "num_features": 1}, [n(2, 1, 4000)]),
        "ConvTasNet": ({"num_sources": 2, "enc_kernel_size": 16, "enc_num_feats": 32, "msk_kernel_size": 3,
                        "msk_num_feats": 16, "msk_num_hidden_feats": 32, "msk_num_layers": 2, "msk_num_stacks": 2},
                       [n(2, 1, 800)]),
        "DeepSpeech": ({"n_feature": 20, "n_hidden": 32, "n_class": 10}, [n(2, 1, 50, 20)]),
        "WaveRNN": ({"upsample_scales": [2, 2], "n_classes": 16, "hop_length": 4, "n_res_block": 2, "n_rnn": 16,
                     "n_fc": 16, "kernel_size": 5, "n_freq": 10, "n_hidden": 8, "n_output": 8},
                    [n(2, 1, 24), n(2, 1, 10, 10)]),
        "Conformer": ({"input_dim": 16, "num_heads": 2, "ffn_dim": 32, "num_layers": 2,
                       "depthwise_conv_kernel_size": 3}, [n(2, 20, 16), torch.tensor([20, 15])]),
        "Emformer": ({"input_dim": 16, "num_heads": 2, "ffn_dim": 32, "num_layers": 2, "segment_length": 4,
                      "right_context_length": 1}, [n(2, 13, 16), torch.tensor([13, 10])]),
        "wav2vec2_model": ({"extractor_mode": "group_norm", "extractor_conv_layer_config": [(8, 10, 5), (8, 3, 2)],
                            "extractor_conv_bias": False, "encoder_embed_dim": 16, "encoder_projection_dropout": 0.0,
                            "encoder_pos_conv_kernel": 8, "encoder_pos_conv_groups": 2, "encoder_num_layers": 2,
                            "encoder_num_heads": 2, "encoder_attention_dropout": 0.0,
                            "encoder_ff_interm_features": 32, "encoder_ff_interm_dropout": 0.0,
                            "encoder_dropout": 0.0, "encoder_layer_norm_first": False, "encoder_layer_drop": 0.0,
                            "aux_num_out": 10}, [n(2, 800)]),
        "emformer_rnnt_model": ({"input_dim": 16, "encoding_dim": 16, "num_symbols": 10, "segment_length": 4,
                                 "right_context_length": 1, "time_reduction_input_dim": 16, "time_reduction_stride": 2,
                                 "transformer_num_heads": 2, "transformer_ffn_dim": 32, "transformer_num_layers": 2,
                                 "transformer_dropout": 0.0, "transformer_activation": "gelu",
                                 "transformer_left_context_length": 4, "transformer_max_memory_size": 0,
                                 "transformer_weight_init_scale_strategy": "depthwise", "transformer_tanh_on_mem": True,
                                 "symbol_embedding_dim": 8, "num_lstm_layers": 1, "lstm_layer_norm": True,
                                 "lstm_layer_norm_epsilon": 1e-5, "lstm_dropout": 0.0},
                                [n(2, 12, 16), torch.tensor([12, 10]), torch.randint(0, 10, (2, 4)),
                                 torch.tensor([4, 3])]),
        # complex spectrograms: torch.stft, view_as_real / view_as_complex, padding, istft (_complex.py)
        "HDemucs": ({"sources": ["a", "b"], "audio_channels": 1, "channels": 8, "nfft": 256, "depth": 3,
                     "norm_starts": 2, "norm_groups": 2, "dconv_attn": 2, "dconv_lstm": 2}, [n(1, 1, 2048)]),
    }


def transforms(torch):
    """torchaudio.transforms front ends (no parameters: their outputs and the waveform's gradient)"""
    wave = torch.randn(2, 4000)
    return {
        "Spectrogram": ({"n_fft": 400, "hop_length": 160}, [wave]),
        "MelSpectrogram": ({"sample_rate": 16000, "n_fft": 400, "n_mels": 40}, [wave]),
        "MFCC": ({"sample_rate": 16000, "n_mfcc": 13, "melkwargs": {"n_fft": 400, "n_mels": 40}}, [wave]),
    }


# Not here: Tacotron2 runs, but its prenet's dropout is on even in eval mode, so its outputs are random draws
NAMES = ["Wav2Letter", "ConvTasNet", "DeepSpeech", "WaveRNN", "Conformer", "Emformer", "wav2vec2_model",
         "emformer_rnnt_model", "HDemucs"]
TRANSFORMS = ["Spectrogram", "MelSpectrogram", "MFCC"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    if os.environ.get("OAR_PY_SANITIZED"):
        pytest.skip("torchaudio models: release pass only (the interpreter is not instrumented)")
    torch = pytest.importorskip("torch", reason="torch is absent (apt-get install python3-torch): no oracle")
    torchaudio = pytest.importorskip("torchaudio", reason="torchaudio is absent (apt-get install python3-torchaudio)")
    if not hasattr(torch, "_C") or torch.__file__ is None or "oar" in torch.__file__:
        pytest.skip("torch resolves to oar in this interpreter (the switch is on): no oracle")
    torch.set_num_threads(1)
    req, want = {"models": []}, {}
    for k, name in enumerate(NAMES):
        torch.manual_seed(k)
        kwargs, xs = cases(torch)[name]
        model = getattr(torchaudio.models, name)(**kwargs).eval().double()
        xs = [x.double() if x.is_floating_point() else x for x in xs]
        sd, arrays, gy, want[name] = torch_side(torch, model, xs, {})
        req["models"].append((f"torchaudio.models:{name}", kwargs, sd, arrays, {}, gy, True))
    for k, name in enumerate(TRANSFORMS):
        torch.manual_seed(100 + k)
        kwargs, xs = transforms(torch)[name]
        model = getattr(torchaudio.transforms, name)(**kwargs).double()
        xs = [x.double() for x in xs]
        sd, arrays, gy, want[name] = torch_side(torch, model, xs, {})
        req["models"].append((f"torchaudio.transforms:{name}", kwargs, sd, arrays, {}, gy, True))
    got = run_oar_side(req, tmp_path_factory.mktemp("torchaudio"))
    return want, {name.split(":")[1]: res for name, res in got["models"].items()}


@pytest.mark.parametrize("name", NAMES + TRANSFORMS)
def test_model_forward_and_gradients(runs, name):
    want, got = runs
    check_model(name, want[name], got[name])
