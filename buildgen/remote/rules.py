"""Which of build.ninja's rules run on the executor (imported by every action: keep light).

Compiles only, for now: they are where a build spends its time, and the compiler's own
dependency scan names their inputs exactly (buildgen.remote.action). Python stages would
need buildgen, onnx and numpy on the workers at the versions that made the key; links are
quick and read libraries from the toolchain. Both run locally (docs/remote.md).
"""

REMOTE_RULES = frozenset({"cc"})
