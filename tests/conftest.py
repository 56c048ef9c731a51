"""Suite-wide fixtures. Only what every test needs belongs here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def _private_action_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Builds in tests (and the processes they start) use a cache folder of this session,
    never the user's ~/.cache/buildgen, and no remote cache from the environment. Nor the
    kernels compiled when buildgen was installed (buildgen/cache/prebuilt.py): whether a
    test's build compiles them must not depend on how the suite's buildgen was installed;
    tests/cache/test_prebuilt.py fills a store of its own."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BUILDGEN_CACHE_DIR", str(tmp_path_factory.mktemp("action-cache")))
        patch.setenv("BUILDGEN_PREBUILT", "off")
        for name in ("BUILDGEN_CACHE", "BUILDGEN_CACHE_MAX_SIZE", "BUILDGEN_REMOTE_CACHE",
                     "BUILDGEN_REMOTE_CACHE_READ_ONLY"):
            patch.delenv(name, raising=False)
        yield
