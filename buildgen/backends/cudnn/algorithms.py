"""Which cuDNN algorithm each convolution tries first: the fastest the tuning records hold.

`buildgen tune --backend cudnn` (buildgen.backends.cudnn.tune) times every forward algorithm
of each distinct convolution on a GPU and records, per algorithm, its time and the workspace
it needed. At codegen the fastest recorded algorithm within `workspace_limit_mb` becomes the
convolution's `algo` in the module; create tries it first and falls back to cuDNN's ranking
(`algorithm_search`) where that GPU or cuDNN cannot run it. Without records the choice stays
with cuDNN at create, as before.

A record's key names what determines the time: the problem (shapes, window, groups, and the
call the module makes: the fused bias-activation one or the plain convolution), the math
mode and the compute capability; nothing names a model, so one record serves every model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from buildgen.backends.cudnn.lower import ConvCall
from buildgen.partition.cost.records import Records

# cudnnConvolutionFwdAlgo_t in enum order (cudnn_cnn.h): the index is the C value.
ALGORITHMS = ("IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
              "WINOGRAD", "WINOGRAD_NONFUSED")


def c_name(algorithm: str) -> str:
    return f"CUDNN_CONVOLUTION_FWD_ALGO_{algorithm}"


@dataclass(frozen=True)
class ConvProblem:
    """What one convolution call computes, as cuDNN sees it (1-D as 2-D of height 1)."""

    x: tuple[int, ...]  # N, C, H, W
    w: tuple[int, ...]  # K, C / groups, R, S
    y: tuple[int, ...]  # N, K, P, Q
    pads: tuple[int, int]
    strides: tuple[int, int]
    dilations: tuple[int, int]
    groups: int
    # the call timed: "convolution" (cudnnConvolutionForward), "bias_relu" or
    # "bias_relu_residual" (cudnnConvolutionBiasActivationForward, z read or not)
    call: str

    def key(self) -> dict[str, Any]:
        return {"x": list(self.x), "w": list(self.w), "y": list(self.y),
                "pads": list(self.pads), "strides": list(self.strides),
                "dilations": list(self.dilations), "groups": self.groups, "call": self.call}


def conv_problem(call: ConvCall) -> ConvProblem:
    kind = "convolution"
    if call.relu:
        kind = "bias_relu_residual" if call.residual else "bias_relu"
    geo = call.geo
    return ConvProblem(call.x_shape, call.w_shape, call.y_shape,
                       (geo.pads_begin[0], geo.pads_begin[1]),
                       (geo.strides[0], geo.strides[1]),
                       (geo.dilations[0], geo.dilations[1]), call.groups, kind)


def record_key(problem: ConvProblem, algorithm: str, sm: int, math: str) -> dict[str, Any]:
    """A tuning record's key for one algorithm of one problem."""
    return {"backend": "cudnn", "pattern": "cudnn.conv", "sm": sm, "math": math,
            "problem": problem.key(), "algorithm": algorithm}


@dataclass(frozen=True)
class Recorded:
    algorithm: str  # a name of ALGORITHMS
    seconds: float
    workspace_bytes: int
    source: str  # the records file's name, for the module's comments

    @property
    def value(self) -> int:
        return ALGORITHMS.index(self.algorithm)


def recorded_algorithm(problem: ConvProblem, sm: int | None, math: str,
                       workspace_limit: int, records: Records | None) -> Recorded | None:
    """The fastest recorded algorithm whose workspace fits; None without such a record."""
    if records is None or sm is None:
        return None
    timed = []
    for index, algorithm in enumerate(ALGORITHMS):
        record = records.lookup(record_key(problem, algorithm, sm, math))
        if record is not None and record.workspace_bytes <= workspace_limit:
            timed.append((record.seconds, index, record.workspace_bytes))
    if not timed:
        return None
    seconds, index, workspace = min(timed)
    return Recorded(ALGORITHMS[index], seconds, workspace, records.source)
