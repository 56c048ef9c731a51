"""The REAPI v2, ByteStream and long-running-operation messages and their gRPC stubs.

They are the code protoc generates from bazelbuild/remote-apis, as the buildgrid-common
package ships it for Python 3.10 and later; grpcio carries them. Imported only when a build
has an executor, so a build without one needs neither package.
"""

from __future__ import annotations

try:
    import grpc
    from buildgrid.common.protos.build.bazel.remote.execution.v2 import (
        remote_execution_pb2 as re_pb2,
    )
    from buildgrid.common.protos.build.bazel.remote.execution.v2 import (
        remote_execution_pb2_grpc as re_grpc,
    )
    from buildgrid.common.protos.google.bytestream import bytestream_pb2 as bs_pb2
    from buildgrid.common.protos.google.bytestream import bytestream_pb2_grpc as bs_grpc
    from buildgrid.common.protos.google.longrunning import operations_pb2
    from buildgrid.common.protos.google.rpc import code_pb2, status_pb2
except ImportError as exc:  # pragma: no cover - depends on the installation
    from buildgen.errors import BuildgenError, Diagnostic

    raise BuildgenError(Diagnostic(
        f"remote execution needs the REAPI client packages ({exc.name} is missing)",
        hint="pip install 'buildgen[remote]' (grpcio and buildgrid-common)",
    )) from None

__all__ = ["bs_grpc", "bs_pb2", "code_pb2", "grpc", "operations_pb2", "re_grpc", "re_pb2",
           "status_pb2"]
