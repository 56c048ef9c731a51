"""The CLI's conventions (docs/cli.md): ninja's everyday flags on `build`, `-C DIR`,
`--version`, shell completion from the real parsers, colour rules and exit codes."""

import io
import os
import re
import shutil
import subprocess

import pytest
from cli_helpers import REPO, run_python, small_project

from buildgen import __version__
from buildgen.cache.summary import Summary
from buildgen.cli import SUBCOMMANDS, all_parsers, main
from buildgen.completion import SHELLS, script
from buildgen.errors import BuildgenError, Diagnostic, SourceLocation
from buildgen.ninja.cli_build import ninja_flags
from buildgen.ninja.tool import exit_status
from buildgen.term import color_enabled, ninja_environ, severity

ESC = "\033["
COLOUR_VARIABLES = ("NO_COLOR", "CLICOLOR_FORCE", "FORCE_COLOR", "TERM")


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch):
    for name in COLOUR_VARIABLES:
        monkeypatch.delenv(name, raising=False)


# 1. ninja's everyday flags --------------------------------------------------------------

def _build_args(*argv: str):
    return all_parsers()["build"].parse_intermixed_args(list(argv))


@pytest.mark.parametrize("argv, expected", [
    (["-j8", "-k0", "-n", "-v"], ["-j", "8", "-k", "0", "-n", "-v"]),
    (["-j", "8", "-k", "0", "-l", "4"], ["-j", "8", "-k", "0", "-l", "4"]),
    (["-l2.5", "-d", "explain", "-dstats"], ["-l", "2.5", "-d", "explain", "-d", "stats"]),
    (["--jobs=3", "--dry-run", "--verbose", "-nv"], ["-j", "3", "-n", "-v"]),
    ([], []),
])
def test_ninja_flags_are_builds_own(argv, expected):
    assert ninja_flags(_build_args(*argv)) == expected


def test_names_and_ninja_flags_mix_in_any_order():
    args = _build_args("m-cpu", "-j2", "m-c", "-n")
    assert args.names == ["m-cpu", "m-c"] and args.jobs == 2 and args.dry_run


def test_a_bad_ninja_flag_value_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["build", "-jmany"])
    assert exit_.value.code == 2
    assert "invalid int value" in capsys.readouterr().err


def test_build_dry_run_without_dashdash(tmp_path, capfd):
    manifest = small_project(tmp_path / "proj")
    build = tmp_path / "out"
    assert main(["build", "--manifest", str(manifest), "--build-dir", str(build),
                 "-j2", "-k0", "-n", "m-cpu"]) == 0
    out = capfd.readouterr().out
    assert "IMPORT m" in out and "LINK m/cpu libm.so" in out
    assert "PARTITION m/c\n" not in out
    assert "actions:" not in out  # -n builds nothing: no summary
    assert not (build / "m" / "graph.json").exists()


def test_build_verbose_shows_command_lines(tmp_path, capfd):
    manifest = small_project(tmp_path / "proj")
    assert main(["build", "--manifest", str(manifest), "-n", "-v", "m-cpu"]) == 0
    out = capfd.readouterr().out
    assert "buildgen.stages" in out and "IMPORT m" not in out


def test_dashdash_still_reaches_ninja(tmp_path, capfd):
    manifest = small_project(tmp_path / "proj")
    assert main(["build", "--manifest", str(manifest), "m-cpu", "--", "-n", "-j1"]) == 0
    assert "IMPORT m" in capfd.readouterr().out
    assert not (tmp_path / "proj" / "build" / "m" / "graph.json").exists()


# 2. -C DIR ------------------------------------------------------------------------------

def test_dash_c_changes_directory_first(tmp_path, capfd):
    small_project(tmp_path / "proj")
    before = os.getcwd()
    assert main(["-C", str(tmp_path), "-C", "proj", "build", "-n", "m-cpu"]) == 0
    assert os.getcwd() == before  # main() in-process leaves the caller where it was
    assert "IMPORT m" in capfd.readouterr().out
    assert (tmp_path / "proj" / "build" / "build.ninja").is_file()


def test_dash_c_works_for_every_subcommand(tmp_path):
    small_project(tmp_path / "proj")
    assert main(["-C", str(tmp_path / "proj"), "gen"]) == 0
    assert (tmp_path / "proj" / "build" / "build.ninja").is_file()


def test_a_missing_dash_c_directory_is_one_line(tmp_path):
    done = run_python("-m", "buildgen", "-C", str(tmp_path / "nope"), "build", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr == f"error: -C {tmp_path / 'nope'}: no such directory\n"
    (tmp_path / "file").write_text("")
    assert main(["-C", str(tmp_path / "file"), "gen"]) == 1


# 3. --version ---------------------------------------------------------------------------

def test_version_works_from_the_command_line():
    done = run_python("-m", "buildgen", "--version")
    assert done.returncode == 0 and done.stdout.strip() == f"buildgen {__version__}"


# 4. completion --------------------------------------------------------------------------

def test_all_parsers_builds_every_subcommand_without_side_effects(tmp_path, monkeypatch,
                                                                 capsys):
    monkeypatch.chdir(tmp_path)
    parsers = all_parsers()
    assert list(parsers) == ["", *SUBCOMMANDS] and "completion" in parsers
    assert parsers[""].prog == "buildgen"
    assert parsers["build"].prog == "buildgen build"
    assert any("-j" in a.option_strings for a in parsers["build"]._actions)
    assert list(tmp_path.iterdir()) == []
    assert capsys.readouterr() == ("", "")


def _all_options():
    for name, parser in all_parsers().items():
        for action in parser._actions:
            for option in action.option_strings:
                yield name, option


@pytest.mark.parametrize("shell", SHELLS)
def test_completion_lists_every_subcommand_and_option(shell, capsys):
    assert main(["completion", shell]) == 0
    text = capsys.readouterr().out
    assert text == script(shell, all_parsers())
    for name in SUBCOMMANDS:
        assert re.search(rf"\b{name}\b", text), name
    for name, option in _all_options():
        bare = option.lstrip("-")
        assert re.search(rf"(^|[\s'(|{{,-]){re.escape(bare)}\b", text, re.M), (name, option)


@pytest.mark.parametrize("shell", SHELLS)
def test_completion_script_parses(shell, tmp_path):
    if shutil.which(shell) is None:
        pytest.skip(f"no {shell} here")
    path = tmp_path / f"completion.{shell}"
    path.write_text(script(shell, all_parsers()))
    done = subprocess.run([shell, "-n", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
@pytest.mark.parametrize("words, expected", [
    ("buildgen bu", {"build"}),
    ("buildgen c", {"clean", "cache", "cmake", "completion"}),
    ("buildgen build --d", {"--dry-run"}),
    ("buildgen -C /tmp cache ''", {"stats", "clean"}),
    ("buildgen completion ''", {"bash", "zsh", "fish"}),
    ("buildgen -", {"-h", "--help", "--version", "--cmake-dir", "-C"}),
])
def test_bash_completion_completes(words, expected, tmp_path):
    path = tmp_path / "buildgen.bash"
    path.write_text(script("bash", all_parsers()))
    program = (f"source {path}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}}-1)); "
               '_buildgen; printf "%s\\n" "${COMPREPLY[@]}"')
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True)
    assert set(done.stdout.split()) == expected, done.stderr


@pytest.mark.skipif(shutil.which("fish") is None, reason="no fish")
def test_fish_completion_completes(tmp_path):
    path = tmp_path / "buildgen.fish"
    path.write_text(script("fish", all_parsers()))
    program = (f"source {path}; complete -C 'buildgen bu'; complete -C 'buildgen build --dr'; "
               "complete -C 'buildgen cache '")
    done = subprocess.run(["fish", "-c", program], capture_output=True, text=True)
    assert [line.split("\t")[0] for line in done.stdout.splitlines()] == [
        "build", "--dry-run", "clean", "stats"], done.stderr


@pytest.mark.skipif(shutil.which("zsh") is None, reason="no zsh")
def test_zsh_completion_registers(tmp_path):
    path = tmp_path / "_buildgen"
    path.write_text(script("zsh", all_parsers()))
    program = (f"autoload -U compinit; compinit -u -d {tmp_path}/zcompdump; source {path}; "
               "print -r -- ${_comps[buildgen]}")
    done = subprocess.run(["zsh", "-f", "-c", program], capture_output=True, text=True)
    assert done.stdout.strip() == "_buildgen" and done.stderr == "", done.stderr


# 5. colour ------------------------------------------------------------------------------

class _Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("environ, tty, expected", [
    ({}, False, False),
    ({}, True, True),
    ({"NO_COLOR": "1"}, True, False),
    ({"NO_COLOR": ""}, True, True),  # only a non-empty NO_COLOR counts
    ({"TERM": "dumb"}, True, False),
    ({"FORCE_COLOR": "1"}, False, True),
    ({"CLICOLOR_FORCE": "1"}, False, True),
    ({"FORCE_COLOR": "0"}, False, False),
    ({"NO_COLOR": "1", "FORCE_COLOR": "1", "CLICOLOR_FORCE": "1"}, True, False),
])
def test_when_colour_is_on(environ, tty, expected):
    assert color_enabled(_Stream(tty), environ) is expected


def test_only_the_severity_word_is_coloured():
    diagnostic = Diagnostic("bad key", SourceLocation("BUILD.yaml", 3, 5), hint="this")
    plain = diagnostic.render()
    assert ESC not in plain and "BUILD.yaml:3:5: error: bad key" in plain
    coloured = diagnostic.render(color=True)
    assert coloured.replace(severity("error", True), "error:") == plain
    assert BuildgenError(diagnostic).render(True) == coloured
    lines = Summary(1, 0, 0, 0, 0, ()).lines(["slow remote"], color=True)
    assert lines[-1] == f"  {severity('warning', True)} slow remote"
    assert ESC not in "".join(Summary(1, 0, 0, 0, 0, ()).lines(["slow remote"]))


def _error_output(tmp_path, capsys) -> str:
    assert main(["gen", "--manifest", str(tmp_path / "nope.yaml")]) == 1
    return capsys.readouterr().err


def test_errors_are_plain_when_not_a_tty(tmp_path, capsys):
    err = _error_output(tmp_path, capsys)
    assert "error:" in err and ESC not in err


def test_force_color_colours_errors(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    err = _error_output(tmp_path, capsys)
    assert err.startswith(severity("error", True)) and ESC in err


def test_no_color_beats_force_color(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("NO_COLOR", "1")
    assert ESC not in _error_output(tmp_path, capsys)


def test_no_color_reaches_ninja_and_its_actions(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("CLICOLOR_FORCE", "1")
    env = ninja_environ(_Stream(True))
    assert env["NO_COLOR"] == "1" and "CLICOLOR_FORCE" not in env
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.delenv("CLICOLOR_FORCE")
    assert "CLICOLOR_FORCE" not in ninja_environ(_Stream(False))
    assert ninja_environ(_Stream(True))["CLICOLOR_FORCE"] == "1"  # ninja keeps action colour
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert ninja_environ(_Stream(False))["CLICOLOR_FORCE"] == "1"


# 6. exit codes --------------------------------------------------------------------------

@pytest.mark.parametrize("ninja, ours", [(0, 0), (1, 1), (130, 130), (2, 130), (-2, 130),
                                         (-15, 143), (7, 1)])
def test_ninja_exit_status_in_buildgen_terms(ninja, ours):
    assert exit_status(ninja) == ours


def test_a_failed_build_exits_1(tmp_path):
    small_project(tmp_path / "proj")
    assert main(["-C", str(tmp_path / "proj"), "build", "no-such-target"]) == 1


def test_usage_errors_exit_2(capsys):
    for argv in (["no-such-command"], ["build", "--no-such-option"], ["completion", "tcsh"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2, argv
    capsys.readouterr()


def test_an_interrupt_exits_130(monkeypatch):
    import buildgen.completion

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(buildgen.completion, "run", interrupted)
    assert main(["completion", "bash"]) == 130


# the docs: every `console` command in docs/cli.md runs -----------------------------------

def test_the_console_examples_in_docs_cli_run(tmp_path):
    text = (REPO / "docs" / "cli.md").read_text()
    blocks = re.findall(r"^```console\n(.*?)^```", text, re.S | re.M)
    commands = [line[2:] for b in blocks for line in b.splitlines() if line.startswith("$ ")]
    assert commands
    if shutil.which("buildgen") is None:
        pytest.skip("buildgen is not installed on PATH")
    bindir = os.path.dirname(shutil.which("buildgen") or "")
    env = {**os.environ, "PYTHONPATH": str(REPO),
           "PATH": os.pathsep.join(p for p in (bindir, os.environ["PATH"]) if p)}
    for command in commands:
        done = subprocess.run(["bash", "-c", command], cwd=REPO, env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, (command, done.stderr)
