"""The executor's settings: the manifest's section, the environment over it, and clear
errors for what cannot work."""

from __future__ import annotations

import pytest

from buildgen.remote.settings import ExecutorSettingsError, resolve_executor

SECTION = {"executor": "grpc://127.0.0.1:50051", "instance": "main",
           "platform": {"OSFamily": "linux", "ISA": "x86-64"}, "jobs": 8}


def test_no_section_and_no_variable_is_no_executor() -> None:
    assert resolve_executor(None, {}) is None
    assert resolve_executor(SECTION, {"BUILDGEN_REMOTE_EXECUTOR": "off"}) is None


def test_the_manifest_section() -> None:
    settings = resolve_executor(SECTION, {})
    assert settings is not None
    assert (settings.target, settings.instance, settings.jobs, settings.tls) == (
        "127.0.0.1:50051", "main", 8, False)
    assert settings.platform == (("ISA", "x86-64"), ("OSFamily", "linux"))


def test_the_environment_overrides_the_manifest(tmp_path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    settings = resolve_executor(SECTION, {
        "BUILDGEN_REMOTE_EXECUTOR": "grpcs://re.example.com:443",
        "BUILDGEN_REMOTE_INSTANCE": "ci", "BUILDGEN_REMOTE_PLATFORM": "ISA=aarch64, pool=big",
        "BUILDGEN_REMOTE_JOBS": "64", "BUILDGEN_REMOTE_TOKEN_FILE": str(token),
        "BUILDGEN_REMOTE_HEADER": "X-Api-Key: k3y"})
    assert settings is not None
    assert (settings.target, settings.instance, settings.jobs, settings.tls) == (
        "re.example.com:443", "ci", 64, True)
    assert settings.platform == (("ISA", "aarch64"), ("OSFamily", "linux"), ("pool", "big"))
    assert settings.token == "s3cret"
    assert settings.header == ("x-api-key", "k3y")
    assert "s3cret" not in repr(settings.url)


@pytest.mark.parametrize(("url", "says"), [
    ("http://host:1", "expected grpc://host:port"),
    ("grpc://host", "expected a port"),
    ("grpc://user:pw@host:1", "must not hold credentials"),
    ("grpc://host:1/main", "the instance is `instance:`"),
])
def test_a_bad_executor_url_says_what_was_expected(url: str, says: str) -> None:
    with pytest.raises(ExecutorSettingsError, match="BUILDGEN_REMOTE_EXECUTOR.*" + says):
        resolve_executor(None, {"BUILDGEN_REMOTE_EXECUTOR": url})


def test_a_bad_variable_names_itself(tmp_path) -> None:
    with pytest.raises(ExecutorSettingsError, match=r"BUILDGEN_REMOTE_PLATFORM: 'ISA'"):
        resolve_executor(SECTION, {"BUILDGEN_REMOTE_PLATFORM": "ISA"})
    with pytest.raises(ExecutorSettingsError, match=r"BUILDGEN_REMOTE_JOBS='0'"):
        resolve_executor(SECTION, {"BUILDGEN_REMOTE_JOBS": "0"})
    with pytest.raises(ExecutorSettingsError, match="needs its key"):
        resolve_executor(SECTION, {"BUILDGEN_REMOTE_TLS_CERT": str(tmp_path / "c.pem")})
    with pytest.raises(ExecutorSettingsError, match="expected 'name: value'"):
        resolve_executor(SECTION, {"BUILDGEN_REMOTE_HEADER": "just-a-key"})
    with pytest.raises(ExecutorSettingsError, match="token file"):
        resolve_executor(SECTION, {"BUILDGEN_REMOTE_TOKEN_FILE": str(tmp_path / "none")})


def test_local_jobs_default_to_the_cores_and_can_be_set(monkeypatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 6)
    settings = resolve_executor(SECTION, {})
    assert settings is not None and settings.local_jobs == 6
    settings = resolve_executor({**SECTION, "local_jobs": 3}, {})
    assert settings is not None and settings.local_jobs == 3
    settings = resolve_executor({**SECTION, "local_jobs": 3}, {"BUILDGEN_REMOTE_LOCAL_JOBS": "1"})
    assert settings is not None and settings.local_jobs == 1
    with pytest.raises(ExecutorSettingsError, match=r"BUILDGEN_REMOTE_LOCAL_JOBS='-2'"):
        resolve_executor(SECTION, {"BUILDGEN_REMOTE_LOCAL_JOBS": "-2"})


def test_platforms_by_action_kind_go_over_the_common_ones() -> None:
    section = {**SECTION, "platforms": {"cuda": {"container-image": "docker://cuda:12"},
                                        "python": {"pool": "py"}}}
    settings = resolve_executor(section, {"BUILDGEN_REMOTE_PLATFORM_CUDA": "ISA=x86-64-v3"})
    assert settings is not None
    assert settings.platform_for("cuda") == (
        ("ISA", "x86-64-v3"), ("OSFamily", "linux"), ("container-image", "docker://cuda:12"))
    assert settings.platform_for("python") == (
        ("ISA", "x86-64"), ("OSFamily", "linux"), ("pool", "py"))
    assert settings.platform_for("c") == settings.platform
    with pytest.raises(ExecutorSettingsError, match=r"\$BUILDGEN_REMOTE_PLATFORM_C: 'x'"):
        resolve_executor(SECTION, {"BUILDGEN_REMOTE_PLATFORM_C": "x"})


def test_the_python_stages_run_remotely_only_when_asked() -> None:
    assert resolve_executor(SECTION, {}).python is None
    assert resolve_executor({**SECTION, "python": "python3"}, {}).python == "python3"
    on = resolve_executor(SECTION, {"BUILDGEN_REMOTE_PYTHON": "/opt/py/bin/python3"})
    assert on.python == "/opt/py/bin/python3"
    assert resolve_executor({**SECTION, "python": "python3"},
                            {"BUILDGEN_REMOTE_PYTHON": "off"}).python is None
