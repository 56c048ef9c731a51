"""Remote execution: run actions on the workers of a Remote Execution API v2 service.

The action wrapper (buildgen.cache.exec) sends an action here on a cache miss when the
build has an executor (the manifest's `remote:` section, or $BUILDGEN_REMOTE_EXECUTOR):

- `settings`: where the executor is and what workers the actions need.
- `tree`: the action's input root as a Merkle tree of `Directory` messages.
- `client`: the gRPC calls (CAS uploads and downloads, Execute, capabilities).
- `action`: an `ActionSpec` as a REAPI `Command` + `Action`, and its result as files.
- `state`: what the build's actions tell each other (the executor is down) and the summary.
"""
