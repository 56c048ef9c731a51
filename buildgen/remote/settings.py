"""Where the executor is and what its workers must offer: manifest first, environment over it.

The manifest's `remote:` section is written at gen time into the build's settings file
(buildgen.cache.settings) next to the cache's; build.ninja never holds it, so neither
ninja's view of a command nor any cache key changes when the executor does. Secrets are
never in the manifest or the settings file: a bearer token comes from the environment or a
file named there, TLS keys from files.

    BUILDGEN_REMOTE_EXECUTOR=grpc[s]://host:port   the REAPI service; `off`: run locally
    BUILDGEN_REMOTE_INSTANCE=<name>                 its instance name
    BUILDGEN_REMOTE_PLATFORM=k=v,k=v                platform properties, over the manifest's
    BUILDGEN_REMOTE_PLATFORM_<KIND>=k=v,k=v         one action kind's, over `platforms:`
    BUILDGEN_REMOTE_PYTHON=python3                  run the Python stages remotely with it
    BUILDGEN_REMOTE_JOBS=64                         `buildgen build`'s -j (default: ninja's)
    BUILDGEN_REMOTE_TIMEOUT=600                     s an action may take on a worker
    BUILDGEN_REMOTE_TOKEN / _TOKEN_FILE             sent as `authorization: Bearer <token>`
    BUILDGEN_REMOTE_HEADER="name: value"            sent with every call (an API key header)
    BUILDGEN_REMOTE_TLS_CA / _TLS_CERT / _TLS_KEY   PEM files (grpcs://; cert+key: mTLS)
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

ENV_EXECUTOR = "BUILDGEN_REMOTE_EXECUTOR"
ENV_INSTANCE = "BUILDGEN_REMOTE_INSTANCE"
ENV_PLATFORM = "BUILDGEN_REMOTE_PLATFORM"
ENV_PYTHON = "BUILDGEN_REMOTE_PYTHON"
PYTHON_KIND = "python"  # the Python stages' action kind in `platforms:`
ENV_JOBS = "BUILDGEN_REMOTE_JOBS"
ENV_LOCAL_JOBS = "BUILDGEN_REMOTE_LOCAL_JOBS"
ENV_TIMEOUT = "BUILDGEN_REMOTE_TIMEOUT"
ENV_TOKEN = "BUILDGEN_REMOTE_TOKEN"
ENV_TOKEN_FILE = "BUILDGEN_REMOTE_TOKEN_FILE"
ENV_HEADER = "BUILDGEN_REMOTE_HEADER"
ENV_TLS = {"tls_ca": "BUILDGEN_REMOTE_TLS_CA", "tls_cert": "BUILDGEN_REMOTE_TLS_CERT",
           "tls_key": "BUILDGEN_REMOTE_TLS_KEY"}
DEFAULT_TIMEOUT = 600.0
_OFF = ("0", "off", "false", "no")


class ExecutorSettingsError(ValueError):
    """A setting that cannot be understood; the message names where it came from."""


@dataclass(frozen=True)
class ExecutorSettings:
    url: str  # grpc://host:port or grpcs://host:port, never with credentials
    instance: str = ""
    platform: tuple[tuple[str, str], ...] = ()  # sorted by name, as the API wants them
    # By action kind (a backend kind for its compiles, "python" for the stages), over
    # `platform`; each sorted by name.
    platforms: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    # The interpreter the workers run the Python stages with; None: they run here.
    python: str | None = None
    # `buildgen build`'s -j when none is given; None: ninja's default.
    jobs: int | None = None
    # Of the actions under way, at most this many run on this machine at once (the rules
    # that stay here, and fallbacks): buildgen.remote.slots. Default: its cores.
    local_jobs: int = 1
    timeout: float = DEFAULT_TIMEOUT
    token: str | None = None
    header: tuple[str, str] | None = None  # (lower-case name, value), from the environment
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None

    @property
    def tls(self) -> bool:
        return self.url.startswith("grpcs://")

    @property
    def target(self) -> str:
        """host:port, as gRPC names a server."""
        return urllib.parse.urlsplit(self.url).netloc

    def platform_for(self, kind: str) -> tuple[tuple[str, str], ...]:
        """The properties an action of `kind` asks for, sorted by name."""
        merged = dict(self.platform)
        merged.update(dict(self.platforms).get(kind, ()))
        return tuple(sorted(merged.items()))


def section_of(options: Mapping[str, object] | None) -> dict[str, object] | None:
    """The manifest's section as the settings file keeps it (None: no executor)."""
    if not options:
        return None
    return {key: options[key] for key in sorted(options)}


def resolve_executor(section: Mapping[str, object] | None,
                     env: Mapping[str, str]) -> ExecutorSettings | None:
    """The executor an action uses, or None to run locally."""
    section = dict(section or {})
    url = env.get(ENV_EXECUTOR, "").strip() or str(section.get("executor") or "")
    if not url or url.lower() in _OFF:
        return None
    where = f"${ENV_EXECUTOR}" if env.get(ENV_EXECUTOR) else "remote.executor"
    _check_url(url, where)
    platform = dict(_platform_pairs(section.get("platform")))
    platform.update(_parse_platform(env.get(ENV_PLATFORM, ""), ENV_PLATFORM))
    tls = section.get("tls") if isinstance(section.get("tls"), Mapping) else {}
    assert isinstance(tls, Mapping)
    files = {key: env.get(name) or _str(tls.get(key.removeprefix("tls_")))
             for key, name in ENV_TLS.items()}
    if bool(files["tls_cert"]) != bool(files["tls_key"]):
        raise ExecutorSettingsError("remote TLS: a client certificate needs its key, and a key "
                                    "its certificate (mTLS)")
    return ExecutorSettings(
        url=url,
        instance=env.get(ENV_INSTANCE) or str(section.get("instance") or ""),
        platform=tuple(sorted(platform.items())),
        platforms=_platforms(section.get("platforms"), env),
        python=_python(env, section.get("python")),
        jobs=_jobs(env, section.get("jobs")),
        local_jobs=int(_number(env, ENV_LOCAL_JOBS, section.get("local_jobs"),
                                 os.cpu_count() or 1, int)),
        timeout=_number(env, ENV_TIMEOUT, section.get("timeout"), DEFAULT_TIMEOUT, float),
        token=_token(env, _str(section.get("token_file"))),
        header=_header(env),
        **files,
    )


def _check_url(url: str, where: str) -> None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("grpc", "grpcs") or not parts.hostname:
        raise ExecutorSettingsError(f"{where}: expected grpc://host:port or grpcs://host:port")
    if parts.username is not None or parts.password is not None:
        raise ExecutorSettingsError(
            f"{where}: the URL must not hold credentials; set ${ENV_TOKEN} or "
            f"${ENV_TOKEN_FILE} instead")
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        raise ExecutorSettingsError(f"{where}: expected a port (grpc://host:port)")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ExecutorSettingsError(
            f"{where}: expected no path after host:port (the instance is `instance:`)")


def _platform_pairs(value: object) -> list[tuple[str, str]]:
    if not isinstance(value, Mapping):
        return []
    return [(str(k), str(v)) for k, v in value.items()]


def _parse_platform(text: str, variable: str) -> list[tuple[str, str]]:
    pairs = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, equals, value = item.partition("=")
        if not equals or not name.strip():
            raise ExecutorSettingsError(
                f"${variable}: {item!r}: expected name=value pairs separated by commas")
        pairs.append((name.strip(), value.strip()))
    return pairs


def _platforms(section: object, env: Mapping[str, str]
               ) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    by_kind = {str(kind): dict(_platform_pairs(pairs))
               for kind, pairs in (section.items() if isinstance(section, Mapping) else ())}
    prefix = f"{ENV_PLATFORM}_"
    for name, text in env.items():
        if name.startswith(prefix) and text.strip():
            kind = name[len(prefix):].lower()
            by_kind.setdefault(kind, {}).update(_parse_platform(text, name))
    return tuple((kind, tuple(sorted(pairs.items())))
                 for kind, pairs in sorted(by_kind.items()) if pairs)


def _python(env: Mapping[str, str], manifest: object) -> str | None:
    text = env.get(ENV_PYTHON, "").strip() or str(manifest or "")
    return None if not text or text.lower() in _OFF else text


def _number(env: Mapping[str, str], name: str, manifest: object, default: float,
            kind: type[int] | type[float]) -> float:
    """The variable `name` over the manifest's value (which its schema checked) over
    `default`."""
    text = env.get(name, "").strip()
    if text:
        return _positive(text, name, kind)
    return kind(str(manifest)) if manifest is not None else kind(default)


def _positive(text: str, name: str, kind: type[int] | type[float]) -> float:
    try:
        value = kind(text)
    except ValueError:
        value = 0
    if not value > 0:
        raise ExecutorSettingsError(f"${name}={text!r}: expected a positive number")
    return value


def _jobs(env: Mapping[str, str], manifest: object) -> int | None:
    if not env.get(ENV_JOBS, "").strip() and manifest is None:
        return None
    return int(_number(env, ENV_JOBS, manifest, 1, int))


def _token(env: Mapping[str, str], manifest_file: str | None) -> str | None:
    if env.get(ENV_TOKEN):
        return env[ENV_TOKEN].strip()
    path = env.get(ENV_TOKEN_FILE) or manifest_file
    if not path:
        return None
    try:
        with open(os.path.expanduser(path)) as f:
            return f.read().strip() or None
    except OSError as exc:
        raise ExecutorSettingsError(
            f"the remote token file {path}: {exc.strerror or exc}") from None


def _header(env: Mapping[str, str]) -> tuple[str, str] | None:
    text = env.get(ENV_HEADER, "").strip()
    if not text:
        return None
    name, colon, value = text.partition(":")
    if not colon or not name.strip() or not value.strip() or " " in name.strip():
        raise ExecutorSettingsError(f"${ENV_HEADER}: expected 'name: value'")
    return name.strip().lower(), value.strip()


def _str(value: object) -> str | None:
    return str(value) if value else None
