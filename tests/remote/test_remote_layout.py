"""Where an action's files sit in the input root, and how its command words are rewritten."""

from __future__ import annotations

import os

from buildgen.cache.action import ActionSpec
from buildgen.remote.action import PACKAGE_DIR, Layout, remote_command


def test_a_build_dir_inside_the_root_keeps_its_relative_paths(tmp_path) -> None:
    layout = Layout.of(str(tmp_path / "project" / "build"), "..")
    assert layout.working_directory == "src/build"
    assert layout.place("../models/m.onnx") == "src/models/m.onnx"
    assert layout.place("m/cpu/src/c.c") == "src/build/m/cpu/src/c.c"
    assert layout.place(os.path.join(PACKAGE_DIR, "include", "bg.h")) == "buildgen/include/bg.h"


def test_two_checkouts_at_different_paths_have_one_layout(tmp_path) -> None:
    one = Layout.of(str(tmp_path / "a" / "build"), "..")
    two = Layout.of(str(tmp_path / "b" / "c" / "build"), "..")
    include = "-I" + os.path.join(PACKAGE_DIR, "include")
    assert one.rewrite(include) == two.rewrite(include) == "-I../../buildgen/include"
    assert one.place(str(tmp_path / "a" / "x.h")) == two.place(str(tmp_path / "b/c/x.h"))


def test_a_build_dir_outside_the_root(tmp_path) -> None:
    layout = Layout.of(str(tmp_path / "out"), str(tmp_path / "src"))
    assert layout.working_directory == "out"
    assert layout.rewrite(str(tmp_path / "src" / "a.c")) == "../src/a.c"
    # a folder that merely starts with the same letters is another folder
    assert layout.rewrite(str(tmp_path / "src2")) == str(tmp_path / "src2")


def test_toolchain_files_are_neither_uploaded_nor_rewritten(tmp_path) -> None:
    layout = Layout.of(str(tmp_path / "build"), "..")
    assert layout.place("/usr/include/stdio.h") is None
    assert layout.rewrite("-I/usr/include") == "-I/usr/include"


def test_the_workers_depfile_paths_come_back_as_local_paths(tmp_path) -> None:
    project = tmp_path / "project"
    layout = Layout.of(str(project / "build"), "..")
    assert layout.localize("m/src/c.c") == "m/src/c.c"
    assert layout.localize("../include/x.h") == "../include/x.h"
    assert layout.localize("../../buildgen/include/bg.h") == os.path.join(
        PACKAGE_DIR, "include", "bg.h")
    assert layout.localize("/usr/include/stdio.h") == "/usr/include/stdio.h"


def test_the_command_has_a_fixed_environment_and_its_outputs(tmp_path) -> None:
    spec = ActionSpec(rule="cc", root="..", outputs=("m/obj/a.o",), inputs=("m/src/a.c",),
                      command=("cc", "-MD", "-MF", "m/obj/a.o.d", "-c", "m/src/a.c", "-o",
                               "m/obj/a.o"), depfile="m/obj/a.o.d")
    layout = Layout.of(str(tmp_path / "p" / "build"), "..")
    environ = {"PATH": "/usr/bin:/bin", "HOME": "/root", "CPATH": "/opt/inc", "SECRET": "x"}
    command = remote_command(spec, layout, environ, (("OSFamily", "linux"),))
    assert [(v.name, v.value) for v in command.environment_variables] == [
        ("CPATH", "/opt/inc"), ("PATH", "/usr/bin:/bin")]
    assert list(command.output_paths) == ["m/obj/a.o", "m/obj/a.o.d"]
    assert list(command.arguments) == list(spec.command)
    assert [(p.name, p.value) for p in command.platform.properties] == [("OSFamily", "linux")]
