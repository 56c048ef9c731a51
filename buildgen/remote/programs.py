"""Running a built program on a worker: `buildgen tune`'s profilers on the GPU the target
names, so a machine without that GPU (a laptop, a CI runner) tunes for a pool that has it.

The input root holds the program alone; the Command runs it with PATH and nothing else of
this shell. Libraries it loads (libcudart, libcudnn) are the toolchain: the workers have
them where this machine does, as for a remote compile. The Action is marked
`do_not_cache` and sent past the action cache: a timing is a measurement, not a function
of the program's bytes.

Platform properties: `remote.platform`, then `platforms: {tune: ...}`, then `gpu` = the
target's `arch` (`sm_90`), which a GPU pool's workers advertise.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from buildgen.cache.keys import file_digest
from buildgen.partition.tune.programs import ProgramRun
from buildgen.remote.action import console
from buildgen.remote.client import ExecutorClient
from buildgen.remote.protos import re_pb2
from buildgen.remote.settings import ExecutorSettings
from buildgen.remote.tree import Blob, InputFile, input_root, message_blob

GPU_PROPERTY = "gpu"
TUNE_KIND = "tune"  # the `platforms:` entry of tune's measurements


@dataclass(frozen=True)
class RemoteProgramRunner:
    """Runs programs on the workers with `gpu` (a ProgramRunner, as run_here is)."""

    settings: ExecutorSettings
    gpu: str  # the target's arch, e.g. sm_90

    @property
    def machine(self) -> str:
        """What the records name as having measured them."""
        return f"a {self.gpu} worker of {self.settings.url}"

    @property
    def platform(self) -> tuple[tuple[str, str], ...]:
        merged = dict(self.settings.platform_for(TUNE_KIND))
        merged[GPU_PROPERTY] = self.gpu
        return tuple(sorted(merged.items()))

    def __call__(self, program: Path) -> ProgramRun:
        """Raises RemoteError when the service could not run it."""
        name = program.name
        blob = Blob(file_digest(str(program)), program.stat().st_size, path=str(program))
        root, tree_blobs = input_root([InputFile(name, blob, executable=True)])
        command = re_pb2.Command(arguments=[f"./{name}"])
        command.environment_variables.add(name="PATH", value=os.environ.get("PATH", ""))
        for key, value in self.platform:
            command.platform.properties.add(name=key, value=value)
        command_blob = message_blob(command)
        action = re_pb2.Action(command_digest=command_blob.digest, input_root_digest=root.digest,
                               do_not_cache=True)
        action.timeout.FromSeconds(int(self.settings.timeout))
        action.platform.CopyFrom(command.platform)
        action_blob = message_blob(action)
        client = ExecutorClient(self.settings)
        try:
            client.upload([*tree_blobs, command_blob, action_blob])
            result = client.execute(action_blob, timeout=self.settings.timeout + 60,
                                    skip_cache=True).result
            stdout = console(client, result.stdout_raw, result.stdout_digest).decode(
                errors="replace")
            stderr = console(client, result.stderr_raw, result.stderr_digest).decode(
                errors="replace")
        finally:
            client.close()
        return ProgramRun(result.exit_code, stdout, stderr)
