"""Fixtures of the remote-execution tests: a real REAPI service (BuildGrid) on loopback.

`reapi_service` starts once per session (~15 s: PostgreSQL, BuildGrid's migrations, the
server) with BUILDGEN_TEST_REAPI_BOTS bots (default 2); see reapi_service.py. Without bgd or
PostgreSQL the tests that need it are skipped locally but fail in CI: .ci/run installs both.

The bots advertise `bot_properties`: OSFamily (e.g. "linux") and ISA (e.g. "x86-64"), this
machine's. BuildGrid matches on OSFamily and ISA only: an action runs on a bot whose
properties include all of the action's (none matches any bot); an action naming another
platform property is refused with FAILED_PRECONDITION ("Unregistered platform property").
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from reapi_service import ReapiService, missing_tools, running_service


@pytest.fixture(scope="session")
def reapi_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReapiService]:
    """The running service: `.address` (grpc://127.0.0.1:PORT), `.instance` ("main"),
    `.executed()` (the bots' JSON records, oldest first), `.bot_properties`."""
    message = missing_tools()
    if message:
        if os.environ.get("CI"):
            pytest.fail(message + " (CI must have them: .ci/run installs them)")
        pytest.skip(message)
    bots = int(os.environ.get("BUILDGEN_TEST_REAPI_BOTS", "2"))
    with running_service(tmp_path_factory.mktemp("reapi"), bots=bots) as service:
        yield service
