"""Which of build.ninja's rules run on the executor (imported by every action: keep light).

Compiles only. They are where a build spends its time, and the compiler's own dependency
scan names their inputs exactly (buildgen.remote.action).
- Links stay here: measured (bench_remote.py's project at 12 models, 4 workers on loopback,
  links sent to the executor for the measurement), a link took 0.96 s remotely against
  0.07 s here, its command 0.12 s of that on the worker; the library has to come back here
  anyway, and every object it links is already here (each remote compile's outputs are).
- Python stages would need buildgen, onnx and numpy on the workers at the versions that
  made the key; they run here, under the local slots (buildgen.remote.slots).
"""

REMOTE_RULES = frozenset({"cc"})
