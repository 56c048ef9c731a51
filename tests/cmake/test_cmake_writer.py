"""CMake quoting and the expansion of ninja rule commands into argument lists."""

from __future__ import annotations

import pytest

from buildgen.cmake.expand import expand_argv, expand_text
from buildgen.cmake.writer import CMakeWriter, quote
from buildgen.errors import BuildgenError
from buildgen.ninja import rules


def test_quote_escapes_what_cmake_would_interpret() -> None:
    assert quote("plain") == '"plain"'
    assert quote("my $models/a b.onnx") == '"my \\$models/a b.onnx"'
    assert quote('say "hi"') == '"say \\"hi\\""'
    assert quote("back\\slash") == '"back\\\\slash"'
    assert quote("${HOME}") == '"\\${HOME}"'  # never expanded by CMake


@pytest.mark.parametrize("bad", ["a;b", "line\nbreak", "$<CONFIG>", ""])
def test_quote_rejects_what_cannot_pass_through_cmake(bad: str) -> None:
    with pytest.raises(BuildgenError, match="cannot be passed through CMake"):
        quote(bad)


def test_call_drops_empty_sections_and_wraps_long_ones() -> None:
    w = CMakeWriter()
    w.call("f", ["x"], [("EMPTY", []), ("SHORT", ["a", "b"])])
    w.call("g", sections=[("LONG", [f"value-{i:02d}" for i in range(20)])])
    w.call("h", ["only"])
    lines = w.text().splitlines()
    assert lines[:3] == ['f("x"', '  SHORT "a" "b"', ")"]
    assert lines[3:5] == ["g(", "  LONG"]
    assert all(len(line) <= 100 for line in lines)
    assert " ".join(lines).count('"value-') == 20
    assert lines[-1] == 'h("only")'


def test_expand_compile_command_like_ninja() -> None:
    values = {
        "cc": ("gcc",), "cflags": ("-O2", "-DX=a b"), "includes": ("-Iinc",),
        "in": ("src/a.c",), "out": ("obj/a.o",),
    }
    assert expand_argv(rules.COMPILE.command, values) == (
        "gcc", "-O2", "-DX=a b", "-Iinc", "-MD", "-MF", "obj/a.o.d", "-c", "src/a.c",
        "-o", "obj/a.o",
    )
    assert expand_text(rules.COMPILE.depfile or "", values) == "obj/a.o.d"


def test_expand_refuses_shell_syntax_and_unknown_variables() -> None:
    with pytest.raises(ValueError, match="shell syntax"):
        expand_argv(rules.ARCHIVE.command, {"in": ("a.o",), "out": ("lib.a",)})
    with pytest.raises(ValueError, match=r"\$nope"):
        expand_argv("tool $nope", {})
    with pytest.raises(ValueError, match="2 values"):
        expand_text("$out.d", {"out": ("a", "b")})
    assert expand_argv("echo $$HOME ${x}", {"x": "y"}) == ("echo", "$HOME", "y")
