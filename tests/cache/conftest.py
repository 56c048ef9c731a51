"""Fixtures of the cache tests: a real nginx (WebDAV) as the remote cache server.

Without nginx the tests that need it are skipped locally but fail in CI (see
nginx.require_nginx): .ci/run installs it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from nginx import NginxServer, require_nginx, start_nginx


@pytest.fixture
def make_nginx(tmp_path: Path) -> Iterator[Callable[..., NginxServer]]:
    """A factory: ``make_nginx(log_auth=False, tls=None)`` starts a server; all stop after."""
    require_nginx()
    servers: list[NginxServer] = []

    def make(*, log_auth: bool = False, tls: tuple[Path, Path] | None = None) -> NginxServer:
        server = start_nginx(tmp_path / f"nginx{len(servers)}", log_auth=log_auth, tls=tls)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def nginx(make_nginx: Callable[..., NginxServer]) -> NginxServer:
    """One running nginx: ``.url``, ``.store`` (corrupt a blob via ``.cas_path(digest)``)."""
    return make_nginx()
