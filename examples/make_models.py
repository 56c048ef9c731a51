"""Regenerate the committed example models in examples/models/.

    pip install torch==2.13.0      # only needed to regenerate; builds use the .onnx files
    python examples/make_models.py

Every model is exported with the TorchScript exporter (dynamo=False, opset 17), the way
most ONNX files in the wild were made, so the graphs carry what real exporters emit:
Gemm for 2-D Linear, Shape/Gather/Unsqueeze/Concat chains that compute Reshape targets
from dynamic dims, Erf-form GELU, and LayerNormalization. Weights come from fixed seeds
and are scaled so activations stay O(1); the output bytes are the same on every run.

Dims are dynamic (batch, and seq for the encoder); a manifest's `inputs:` fixes them.
"""

from __future__ import annotations

import argparse
import math
import warnings
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 (the conventional alias)

OPSET = 17
MODELS_DIR = Path(__file__).resolve().parent / "models"


class Mlp(nn.Module):
    """512 -> 1024 -> 512 -> 10 with ReLU then GELU (about 4.2 MB of float32 weights)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(512, 1024)
        self.fc2 = nn.Linear(1024, 512)
        self.fc3 = nn.Linear(512, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.fc1(x))
        x = F.gelu(self.fc2(x))
        return self.fc3(x)


class ConvBnRelu(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel_size=3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)))


class Cnn(nn.Module):
    """3x32x32 -> conv stem -> pool -> residual block -> pool -> conv -> GAP -> Gemm(10)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = ConvBnRelu(3, 32)
        self.block1 = ConvBnRelu(32, 32)
        self.block2 = ConvBnRelu(32, 32)
        self.head_conv = ConvBnRelu(32, 64)
        self.fc = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(self.stem(x), 2)  # 32x32 -> 16x16
        x = x + self.block2(self.block1(x))  # residual Add
        x = F.max_pool2d(x, 2)  # 16x16 -> 8x8
        x = self.head_conv(x)
        x = F.adaptive_avg_pool2d(x, 1)  # exported as GlobalAveragePool
        return self.fc(torch.flatten(x, 1))


class EncoderBlock(nn.Module):
    """Post-norm transformer encoder block: d_model 256, 4 heads, FFN 1024.

    Attention is written out by hand (not nn.MultiheadAttention) as in BERT-style code:
    the head split reads batch and seq from x.size(), which the exporter turns into
    Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
    """

    def __init__(self, d_model: int = 256, heads: int = 4, ffn: int = 1024) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = d_model // heads
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)
        self.ln1 = nn.LayerNorm(d_model)
        self.ff1 = nn.Linear(d_model, ffn)
        self.ff2 = nn.Linear(ffn, d_model)
        self.ln2 = nn.LayerNorm(d_model)

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        b, s = t.size(0), t.size(1)
        return t.view(b, s, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s = x.size(0), x.size(1)
        q, k, v = self._split(self.q(x)), self._split(self.k(x)), self._split(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        ctx = ctx.transpose(1, 2).reshape(b, s, self.heads * self.head_dim)
        x = self.ln1(x + self.out(ctx))
        return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))


def _randomize_batchnorm(model: nn.Module, gen: torch.Generator) -> None:
    """Give BatchNorm non-trivial statistics so a wrong BN lowering cannot go unnoticed."""
    for mod in model.modules():
        if isinstance(mod, nn.BatchNorm2d):
            n = mod.num_features
            with torch.no_grad():
                mod.weight.copy_(1.0 + 0.1 * torch.randn(n, generator=gen))
                mod.bias.copy_(0.1 * torch.randn(n, generator=gen))
                mod.running_mean.copy_(0.1 * torch.randn(n, generator=gen))
                mod.running_var.copy_(0.5 + torch.rand(n, generator=gen))


def _export(
    model: nn.Module,
    example: torch.Tensor,
    path: Path,
    input_name: str,
    dynamic: dict[int, str],
    *,
    keep_batchnorm: bool = False,
) -> None:
    model.eval()
    # TrainingMode.EVAL folds BatchNormalization into the preceding Conv; PRESERVE (with the
    # module already in eval mode) keeps it as a node, which is what the CNN is meant to test.
    training = torch.onnx.TrainingMode.PRESERVE if keep_batchnorm else torch.onnx.TrainingMode.EVAL
    with warnings.catch_warnings():
        # The exporter warns that dynamo=False is legacy (chosen on purpose, see the module
        # docstring) and that PRESERVE may fold trainable parameters (harmless in eval mode).
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        torch.onnx.export(
            model,
            (example,),
            str(path),
            dynamo=False,
            opset_version=OPSET,
            input_names=[input_name],
            output_names=["y"],
            dynamic_axes={input_name: dynamic, "y": {0: dynamic[0]}},
            training=training,
        )


def make_all(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)

    mlp = Mlp()
    _export(mlp, torch.randn(2, 512), out_dir / "mlp.onnx", "x", {0: "batch"})

    torch.manual_seed(1)
    cnn = Cnn()
    _randomize_batchnorm(cnn, torch.Generator().manual_seed(2))
    _export(
        cnn,
        torch.randn(2, 3, 32, 32),
        out_dir / "cnn.onnx",
        "image",
        {0: "batch"},
        keep_batchnorm=True,
    )

    torch.manual_seed(3)
    enc = EncoderBlock()
    _export(enc, torch.randn(2, 16, 256), out_dir / "encoder.onnx", "x", {0: "batch", 1: "seq"})
    return [out_dir / name for name in ("mlp.onnx", "cnn.onnx", "encoder.onnx")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=MODELS_DIR)
    args = parser.parse_args()
    for path in make_all(args.out):
        print(f"{path}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
