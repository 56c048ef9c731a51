"""Where the action cache lives and how it behaves: manifest first, environment over it.

The manifest's `cache:` section is resolved at gen time into `<build>/.buildgen/cache.json`,
which the actions read; build.ninja never holds a cache setting, so neither ninja's view of
a command nor any action key depends on them. Environment variables (for CI) override it:

    BUILDGEN_CACHE=off                 no caching: every action runs as without a cache
    BUILDGEN_CACHE_DIR=<folder>        the local store (default: $XDG_CACHE_HOME/buildgen)
    BUILDGEN_CACHE_MAX_SIZE=2GB        the local store's size limit (LRU eviction above it)
    BUILDGEN_REMOTE_CACHE=<url>        a Bazel-HTTP remote cache
    BUILDGEN_REMOTE_CACHE_READ_ONLY=1  read the remote cache, never write it
    BUILDGEN_REMOTE_CACHE_TIMEOUT=60   seconds one remote request may take in all (connect,
                                       send, answer); after the first one that fails, the
                                       build stops asking the remote (remote.py)
    BUILDGEN_PREBUILT=off              do not read the store of kernels compiled when
                                       buildgen was installed (prebuilt.py); =<folder>:
                                       read that store instead
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.cache.environ import environ_data
from buildgen.fsutil import private_folder, read_file
from buildgen.remote.settings import ExecutorSettings, ExecutorSettingsError, resolve_executor

if TYPE_CHECKING:
    from buildgen.manifest import CacheOptions
    from buildgen.manifest.model import RemoteOptions

REMOTE_STATE = ".buildgen/remote"  # the remote client's shared state, in the build dir
SETTINGS_FILE = ".buildgen/cache.json"  # relative to the build dir
SETTINGS_FORMAT = 1
DEFAULT_MAX_SIZE = 5 * 10**9

ENV_ENABLED = "BUILDGEN_CACHE"
ENV_DIR = "BUILDGEN_CACHE_DIR"
ENV_MAX_SIZE = "BUILDGEN_CACHE_MAX_SIZE"
ENV_REMOTE = "BUILDGEN_REMOTE_CACHE"
ENV_READ_ONLY = "BUILDGEN_REMOTE_CACHE_READ_ONLY"
ENV_REMOTE_TIMEOUT = "BUILDGEN_REMOTE_CACHE_TIMEOUT"
ENV_PREBUILT = "BUILDGEN_PREBUILT"

_UNITS = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
          "KI": 2**10, "MI": 2**20, "GI": 2**30, "TI": 2**40}  # fmt: skip
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]I?)?B?\s*", re.IGNORECASE)
_FALSE = ("0", "off", "false", "no")
_TRUE = ("1", "on", "true", "yes")


class SettingsError(ValueError):
    """A cache setting that cannot be understood; the message names where it came from."""


@dataclass(frozen=True)
class CacheSettings:
    enabled: bool
    dir: Path  # absolute
    max_size: int  # bytes
    remote: str | None = None
    read_only: bool = False
    remote_timeout: float | None = None  # s per remote request; None: the client's default
    executor: ExecutorSettings | None = None  # remote execution (buildgen.remote)
    prebuilt: Path | None = None  # the read-only store filled at install (prebuilt.py)


def parse_size(text: str) -> int:
    """'2GB' -> 2_000_000_000, '512MiB' -> 536_870_912, '1000' -> 1000 bytes."""
    match = _SIZE.fullmatch(text)
    if not match:
        raise SettingsError(f"size {text!r}: expected a number and a unit such as 2GB or 512MiB")
    return int(float(match.group(1)) * _UNITS[(match.group(2) or "").upper()])


def default_dir(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(os.path.abspath(base)) / "buildgen"


def private_subfolder(name: str) -> Path | None:
    """Folder `name` of this user's buildgen cache folder, made private
    (fsutil.private_folder), or None: where buildgen keeps what it runs or trusts (the
    schemas' generated code, plug-ins' entry points)."""
    return private_folder(default_dir(os.environ) / name)


def settings_file_text(options: CacheOptions, remote: RemoteOptions | None = None) -> str:
    """What gen writes: the manifest's `cache:` (paths absolute, sizes in bytes) and its
    `remote:` section."""
    section = {
        "format": SETTINGS_FORMAT,
        "enabled": options.enabled,
        "dir": str(options.dir) if options.dir else None,
        "max_size": options.max_size,
        "remote": options.remote,
        "read_only": options.read_only,
        "executor": remote.section() if remote is not None else None,
    }
    return json.dumps(section, indent=2, sort_keys=True) + "\n"


def enabled_at_gen(options: CacheOptions, env: Mapping[str, str] | None = None) -> bool:
    """Whether gen routes actions through the cache. Off (manifest or $BUILDGEN_CACHE),
    build.ninja has the plain commands: no wrapper process at all. An environment that
    turns the cache off only for a plain `ninja` run makes the wrapper pass through."""
    section = json.loads(settings_file_text(options))
    return resolve_settings(section, os.environ if env is None else env).enabled


def load_settings(build_dir: Path, env: Mapping[str, str] | None = None) -> CacheSettings:
    """The settings for actions of the build in `build_dir`."""
    env = os.environ if env is None else env
    text = _read_small(os.path.join(build_dir, SETTINGS_FILE))
    # The folder too: a relative $BUILDGEN_CACHE_DIR is relative to it.
    asked = (text, _environment_key(env), os.getcwd())
    if (known := _RESOLVED.get(asked)) is not None:
        return known
    section: dict[str, object] = {}
    if text is not None:
        try:
            section = json.loads(text)
        except ValueError as exc:
            raise SettingsError(
                f"{build_dir / SETTINGS_FILE}: {exc}; run `buildgen gen`") from None
    settings = resolve_settings(section, env)
    if settings.executor is None:  # an executor's settings read files too (its token)
        if len(_RESOLVED) >= 64:
            _RESOLVED.clear()
        _RESOLVED[asked] = settings
    return settings


def _environment_key(env: Mapping[str, str]) -> tuple[tuple[object, object], ...]:
    """`env` as a memo key: os.environ's own mapping of bytes when it is os.environ."""
    data = environ_data() if env is os.environ else None
    return tuple(data.items()) if data is not None else tuple(env.items())


def _read_small(path: str) -> bytes | None:
    """A small file's bytes, None when it is missing."""
    try:
        return read_file(path)[0]
    except FileNotFoundError:
        return None


# What load_settings resolved in this process, by the settings file's text and the
# environment: a worker's runner reads the same ones for every action of a build.
_RESOLVED: dict[tuple[bytes | None, tuple[tuple[object, object], ...], str], CacheSettings] = {}


def resolve_settings(section: Mapping[str, object], env: Mapping[str, str]) -> CacheSettings:
    enabled = _flag(env, ENV_ENABLED, bool(section.get("enabled", True)))
    folder = env.get(ENV_DIR) or section.get("dir")
    max_size = DEFAULT_MAX_SIZE
    if isinstance(section.get("max_size"), int):
        max_size = int(section["max_size"])  # type: ignore[call-overload]
    if env.get(ENV_MAX_SIZE):
        try:
            max_size = parse_size(env[ENV_MAX_SIZE])
        except SettingsError as exc:
            raise SettingsError(f"${ENV_MAX_SIZE}: {exc}") from None
    remote = env.get(ENV_REMOTE) or section.get("remote") or None
    executor_section = section.get("executor")
    try:
        executor = resolve_executor(
            executor_section if isinstance(executor_section, Mapping) else None, env)
    except ExecutorSettingsError as exc:
        raise SettingsError(str(exc)) from None
    return CacheSettings(
        enabled=enabled,
        dir=Path(os.path.abspath(str(folder))) if folder else default_dir(env),
        max_size=max_size,
        remote=str(remote) if remote else None,
        read_only=_flag(env, ENV_READ_ONLY, bool(section.get("read_only", False))),
        remote_timeout=_seconds(env, ENV_REMOTE_TIMEOUT),
        executor=executor,
        prebuilt=_prebuilt_store(env),
    )


def _prebuilt_store(env: Mapping[str, str]) -> Path | None:
    value = env.get(ENV_PREBUILT, "").strip()
    if value.lower() in _FALSE:
        return None
    if value and value.lower() not in _TRUE:
        return Path(os.path.abspath(value))
    from buildgen.cache.prebuilt import installed_store

    return installed_store()


def _seconds(env: Mapping[str, str], name: str) -> float | None:
    value = env.get(name, "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise SettingsError(f"${name}={env[name]!r}: expected a positive number of seconds")
    return seconds


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = env.get(name, "").strip().lower()
    if not value:
        return default
    if value in _FALSE:
        return False
    if value in _TRUE:
        return True
    raise SettingsError(f"${name}={env[name]!r}: expected one of {', '.join(_TRUE + _FALSE)}")
