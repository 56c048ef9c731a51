"""Remote-cache credentials: where they come from, that they are sent, that they go nowhere else."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest
from nginx import NginxServer

from buildgen.cache.model import ActionResult, OutputFile
from buildgen.cache.remote import RemoteCache
from buildgen.errors import BuildgenError

TOKEN = "s3cret-t0ken-2f9c"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("BUILDGEN_REMOTE_CACHE_HEADER", "BUILDGEN_REMOTE_CACHE_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))


def auth_values(server: NginxServer, requests: int) -> list[str]:
    return [line.split('auth="', 1)[1].rstrip('"') for line in server.requests(requests)]


def exercise(remote: RemoteCache) -> None:
    data = b"payload"
    remote.put_blob(sha(data), data)
    remote.has_blob(sha(data))
    remote.get_blob(sha(data))
    remote.put_action(sha(b"k"), ActionResult((OutputFile("p", sha(data), len(data)),)))
    remote.get_action(sha(b"k"))


def test_token_is_sent_as_bearer_on_every_request_and_written_nowhere(
    make_nginx: Callable[..., NginxServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = make_nginx(log_auth=True)
    monkeypatch.setenv("BUILDGEN_REMOTE_CACHE_TOKEN", TOKEN)
    state = tmp_path / "build" / ".buildgen"
    remote = RemoteCache.from_settings(server.url, False, state)
    exercise(remote)
    assert auth_values(server, 5) == [f"Bearer {TOKEN}"] * 5

    # Make every kind of state file appear (a corrupt blob, then an outage): none holds it.
    server.cas_path(sha(b"payload")).write_bytes(b"tampered")
    assert remote.get_blob(sha(b"payload")) is None
    server.stop()
    assert remote.get_action(sha(b"k")) is None
    written = [p for p in (tmp_path / "build").rglob("*") if p.is_file()]
    assert len(written) == 2
    assert not [p for p in written if TOKEN in p.read_text()]
    assert not [w for w in remote.warnings() if TOKEN in w]
    assert TOKEN not in repr(remote)


def test_header_wins_over_token_and_is_read_at_request_time(
    make_nginx: Callable[..., NginxServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = make_nginx(log_auth=True)
    monkeypatch.setenv("BUILDGEN_REMOTE_CACHE_TOKEN", TOKEN)
    monkeypatch.setenv("BUILDGEN_REMOTE_CACHE_HEADER", "Authorization:  Basic Zm9vOmJhcg==")
    remote = RemoteCache.from_settings(server.url, True, tmp_path / "state")
    remote.has_blob(sha(b"a"))
    monkeypatch.setenv("BUILDGEN_REMOTE_CACHE_HEADER", "Authorization: Bearer rotated")
    remote.has_blob(sha(b"a"))
    assert auth_values(server, 2) == ["Basic Zm9vOmJhcg==", "Bearer rotated"]


def test_netrc_gives_basic_auth_for_its_host(
    make_nginx: Callable[..., NginxServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = make_nginx(log_auth=True)
    netrc = tmp_path / "netrc"
    netrc.write_text(
        "machine other.example login x password y\nmachine 127.0.0.1 login ci password pw\n"
    )
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    RemoteCache.from_settings(server.url, True, tmp_path / "state").has_blob(sha(b"a"))
    assert auth_values(server, 1) == ["Basic " + base64.b64encode(b"ci:pw").decode()]


def test_no_credentials_send_no_header(
    make_nginx: Callable[..., NginxServer], tmp_path: Path
) -> None:
    server = make_nginx(log_auth=True)
    RemoteCache.from_settings(server.url, True, tmp_path / "state").has_blob(sha(b"a"))
    assert auth_values(server, 1) == ["-"]


def test_credentials_in_the_url_are_refused_with_a_pointer_to_netrc(tmp_path: Path) -> None:
    with pytest.raises(BuildgenError) as err:
        RemoteCache.from_settings("https://ci:hunter2@cache.example:9092", False, tmp_path)
    message = str(err.value)
    assert "netrc" in message and "machine cache.example" in message
    assert "hunter2" not in message


@pytest.mark.parametrize(
    ("env", "value", "expected"),
    [
        ("BUILDGEN_REMOTE_CACHE_HEADER", "Bearer abc-no-name", "'Name: value'"),
        ("BUILDGEN_REMOTE_CACHE_HEADER", "Authorization: a\r\nX-Injected: b", "'Name: value'"),
        ("BUILDGEN_REMOTE_CACHE_TOKEN", "two words", "without spaces"),
    ],
)
def test_malformed_credential_settings_are_errors_that_do_not_echo_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: str, value: str, expected: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(BuildgenError) as err:
        RemoteCache.from_settings("http://cache.example", False, tmp_path)
    assert expected in str(err.value) and value not in str(err.value)


def test_a_broken_netrc_is_an_error_naming_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine cache.example login ci password pw\nmachin typo\n")
    monkeypatch.setenv("NETRC", str(netrc))
    with pytest.raises(BuildgenError, match="cannot read the netrc file") as err:
        RemoteCache.from_settings("http://cache.example", False, tmp_path)
    assert f"{netrc}:2" in str(err.value) and "typo" not in str(err.value)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("ftp://cache.example", "must start with http"),
        ("cache.example:8080", "must start with http"),
        ("http://cache.example/?token=x", "must not have a query"),
        ("http://cache.example:99999", "port is not a number"),
        ("http://cache.example:http", "port is not a number"),
    ],
)
def test_bad_urls_are_errors(tmp_path: Path, url: str, expected: str) -> None:
    with pytest.raises(BuildgenError, match=expected) as err:
        RemoteCache.from_settings(url, False, tmp_path)
    assert url not in str(err.value)


def test_settings_normalise_the_url(tmp_path: Path) -> None:
    remote = RemoteCache.from_settings(" https://cache.example:9092/ci/ ", True, tmp_path)
    assert remote.url == "https://cache.example:9092/ci" and remote.read_only
