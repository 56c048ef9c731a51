"""Export the corpus's transformers architectures to ONNX with random weights.

The models in tests/corpus/models/hf_*.onnx were written by this script and are committed
(each well under 2 MB), so the tests need neither torch nor transformers. The architectures
are the library's own classes with small configs (fewer layers, narrower), so every op
pattern the exporter emits for them is there: attention masks (the Where(IsNaN(...)) guard),
causal masks, GELU/SiLU, LayerNorm/GroupNorm, Resize in segmentation decoders, 1-D convs
in audio front ends. Reproduce with the pinned exporter:

    pip install torch==2.13.0 transformers==5.23.0 onnxscript==0.7.2
    python bench/corpus/export_hf.py tests/corpus/models
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import transformers as tf

Example = tuple[torch.nn.Module, tuple[torch.Tensor, ...], list[str], list[str]]


def _tokens(vocab: int, length: int = 16) -> torch.Tensor:
    return torch.randint(0, vocab, (1, length))


def bert() -> Example:
    cfg = tf.BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=128,
                        max_position_embeddings=64)
    ids = _tokens(1000)
    mask = torch.ones_like(ids)
    return (tf.BertModel(cfg), (ids, mask), ["input_ids", "attention_mask"],
            ["last_hidden_state", "pooler_output"])


def gpt2() -> Example:
    cfg = tf.GPT2Config(vocab_size=1000, n_embd=64, n_layer=2, n_head=4, n_positions=64)
    return tf.GPT2LMHeadModel(cfg), (_tokens(1000),), ["input_ids"], ["logits"]


def vit() -> Example:
    cfg = tf.ViTConfig(image_size=64, patch_size=8, hidden_size=64, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=128, num_labels=10)
    return (tf.ViTForImageClassification(cfg), (torch.rand(1, 3, 64, 64),), ["pixel_values"],
            ["logits"])


def segformer() -> Example:
    cfg = tf.SegformerConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[4, 2],
                             hidden_sizes=[16, 32], num_attention_heads=[1, 2],
                             decoder_hidden_size=32, num_labels=5)
    return (tf.SegformerForSemanticSegmentation(cfg), (torch.rand(1, 3, 64, 64),),
            ["pixel_values"], ["logits"])


def wav2vec2() -> Example:
    cfg = tf.Wav2Vec2Config(vocab_size=32, hidden_size=64, num_hidden_layers=2,
                            num_attention_heads=4, intermediate_size=128,
                            conv_dim=(32, 32, 32), conv_stride=(5, 2, 2),
                            conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
                            num_conv_pos_embedding_groups=4)
    audio = (torch.rand(1, 1600) - 0.5) * 0.2
    return tf.Wav2Vec2ForCTC(cfg), (audio,), ["input_values"], ["logits"]


def whisper_encoder() -> Example:
    cfg = tf.WhisperConfig(vocab_size=100, num_mel_bins=16, d_model=64, encoder_layers=2,
                           encoder_attention_heads=4, decoder_layers=1,
                           decoder_attention_heads=4, encoder_ffn_dim=128,
                           decoder_ffn_dim=128, max_source_positions=50, pad_token_id=1,
                           bos_token_id=2, eos_token_id=3, decoder_start_token_id=2)
    encoder = tf.WhisperModel(cfg).get_encoder()
    return encoder, (torch.rand(1, 16, 100),), ["input_features"], ["last_hidden_state"]


def mobilenet_v2() -> Example:
    cfg = tf.MobileNetV2Config(image_size=96, depth_multiplier=0.35, num_labels=10)
    return (tf.MobileNetV2ForImageClassification(cfg), (torch.rand(1, 3, 96, 96),),
            ["pixel_values"], ["logits"])


def convnext() -> Example:
    cfg = tf.ConvNextConfig(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 2, 1],
                            num_labels=10, image_size=64)
    return (tf.ConvNextForImageClassification(cfg), (torch.rand(1, 3, 64, 64),),
            ["pixel_values"], ["logits"])


def efficientnet() -> Example:
    cfg = tf.EfficientNetConfig(image_size=64, width_coefficient=0.25, depth_coefficient=0.5,
                                num_labels=10, hidden_dim=320)
    return (tf.EfficientNetForImageClassification(cfg), (torch.rand(1, 3, 64, 64),),
            ["pixel_values"], ["logits"])


def yolos() -> Example:
    cfg = tf.YolosConfig(image_size=[64, 64], patch_size=16, hidden_size=64,
                         num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                         num_detection_tokens=10, num_labels=5)
    return (tf.YolosForObjectDetection(cfg), (torch.rand(1, 3, 64, 64),), ["pixel_values"],
            ["logits", "pred_boxes"])


def t5_encoder() -> Example:
    cfg = tf.T5Config(vocab_size=1000, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                      num_heads=4)
    ids = _tokens(1000)
    return tf.T5EncoderModel(cfg), (ids, torch.ones_like(ids)), ["input_ids", "attention_mask"], [
        "last_hidden_state"]


EXPORTS: dict[str, Callable[[], Example]] = {
    "bert": bert, "gpt2": gpt2, "vit": vit, "segformer": segformer, "wav2vec2": wav2vec2,
    "whisper_encoder": whisper_encoder, "mobilenet_v2": mobilenet_v2, "convnext": convnext,
    "efficientnet": efficientnet, "yolos": yolos, "t5_encoder": t5_encoder,
}


class _Outputs(torch.nn.Module):
    """Returns the named fields of a transformers output as a plain tuple."""

    def __init__(self, model: torch.nn.Module, names: list[str]) -> None:
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *args: Any) -> tuple[torch.Tensor, ...]:
        out = self.model(*args, return_dict=True) if _takes_return_dict(self.model) else \
            self.model(*args)
        return tuple(out[name] for name in self.names)


def _takes_return_dict(model: torch.nn.Module) -> bool:
    import inspect

    return "return_dict" in inspect.signature(model.forward).parameters


def export(name: str, folder: Path) -> Path:
    torch.manual_seed(0)
    model, args, inputs, outputs = EXPORTS[name]()
    wrapped = _Outputs(model.eval(), outputs).eval()
    path = folder / f"hf_{name}.onnx"
    with torch.no_grad():
        try:
            torch.onnx.export(wrapped, args, str(path), input_names=inputs,
                              output_names=outputs, opset_version=18, dynamo=True,
                              external_data=False)
        except torch.onnx.errors.OnnxExporterError:
            # torch.export cannot trace some models (EfficientNet's); the TorchScript
            # exporter, which users of older torch versions have, still can.
            torch.onnx.export(wrapped, args, str(path), input_names=inputs,
                              output_names=outputs, opset_version=17, dynamo=False)
    return path


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/corpus/models")
    out.mkdir(parents=True, exist_ok=True)
    for name in sys.argv[2:] or EXPORTS:
        try:
            written = export(name, out)
            print(f"{name}: {written} {written.stat().st_size:,} bytes")
        except Exception as exc:  # noqa: BLE001 - report every architecture, then exit non-zero
            print(f"{name}: FAILED {type(exc).__name__}: {str(exc)[:300]}")
