"""The ninja writer: escaping is checked against ninja itself, not only against strings."""

import shlex
import subprocess

import pytest

from buildgen.errors import BuildgenError
from buildgen.ninja.tool import ninja_binary
from buildgen.ninja.writer import (
    NinjaWriter,
    escape_path,
    escape_paths,
    escape_value,
    quote_args,
)


def test_escape_path_escapes_dollar_space_and_colon():
    assert escape_path("my $models/a b:c.onnx") == "my$ $$models/a$ b$:c.onnx"
    assert escape_path("$") == "$$"
    assert escape_path("plain/path.o") == "plain/path.o"


@pytest.mark.parametrize("bad", ["a|b", "a\nb", "a\rb", ""])
def test_escape_path_rejects_what_ninja_cannot_hold(bad):
    with pytest.raises(BuildgenError):
        escape_path(bad)


def test_values_escape_only_dollar_and_keep_a_leading_space():
    assert escape_value("IMPORT a:b c") == "IMPORT a:b c"
    assert escape_value("cost $5") == "cost $$5"
    assert escape_value(" x") == "$ x"
    with pytest.raises(BuildgenError):
        escape_value("two\nlines")


def test_arguments_are_quoted_once_then_dollar_escaped():
    args = ("-DNAME=a b", "$HOME", "it's", "plain")
    text = quote_args(args)
    assert text == "'-DNAME=a b' '$$HOME' 'it'\"'\"'s' plain"
    # What ninja hands the shell (after $$ -> $) splits back into the same arguments.
    assert shlex.split(text.replace("$$", "$")) == list(args)


def test_the_one_pass_quoting_matches_shlex_on_every_kind_of_argument():
    """quote_args skips shlex.quote, and escape_paths escape_path, when nothing needs it:
    check both shortcuts against the long way on every combination of a few arguments
    over the characters that matter."""
    import itertools
    import random

    pieces = ["", "a", "-O2", "x/y.o", " ", "$", "'", '"', "=", "\\", "é", "\t", ":", "@",
              "*", "~", "#", "a b", ",", "%+", "|", "\n"]
    rng = random.Random(7)
    cases = [list(c) for n in range(4) for c in itertools.product(pieces[:8], repeat=n)]
    cases += [[rng.choice(pieces) + rng.choice(pieces) for _ in range(rng.randint(1, 5))]
              for _ in range(5000)]
    for args in cases:
        assert _outcome(quote_args, args) == _outcome(
            lambda a: escape_value(" ".join(shlex.quote(x) for x in a)), args), args
        assert _outcome(escape_paths, args) == _outcome(
            lambda a: " ".join(escape_path(x) for x in a), args), args


def _outcome(function, args):
    """What `function(args)` returns, or the message of the BuildgenError it raises."""
    try:
        return function(args)
    except BuildgenError as exc:
        return ("raised", str(exc))


def test_a_tuple_is_arguments_and_a_str_is_literal_whatever_the_name():
    w = NinjaWriter()
    w.variable("cflags", "-O2 -g")  # a str: emitted as written
    w.variable("desc", ("a b",))  # a tuple: quoted, even under a "description" name
    assert w.text() == "cflags = -O2 -g\ndesc = 'a b'\n"


def test_build_line_layout():
    w = NinjaWriter()
    w.build(
        ["out 1.o"], "cc", ["in.c"], implicit=["w.bin"], order_only=["h.h"],
        implicit_outputs=["out.d"], variables=[("args", ("x",))],
    )
    assert w.text() == "build out$ 1.o | out.d: cc in.c | w.bin || h.h\n  args = x\n"


def test_ninja_reads_escaped_paths_and_arguments_back(tmp_path):
    """Round trip through ninja: odd names reach the command as the exact same strings."""
    odd_dir = tmp_path / "my $models: v1"
    odd_dir.mkdir()
    (odd_dir / "in put.txt").write_text("hello\n")
    w = NinjaWriter()
    w.rule("copy", [("command", "cp $in $out && printf '%s\\n' $args > $out.args")])
    w.build(
        ["out $x.txt"], "copy", ["my $models: v1/in put.txt"],
        variables=[("args", ("a b", "$HOME", "it's"))],
    )
    (tmp_path / "build.ninja").write_text(w.text())
    done = subprocess.run([ninja_binary(), "-C", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "out $x.txt").read_text() == "hello\n"
    assert (tmp_path / "out $x.txt.args").read_text() == "a b\n$HOME\nit's\n"
