"""The emitted build.ninja is valid ninja: it loads, plans a full build, and hands each
command its arguments intact (checked with ninja's own tools, nothing is compiled)."""

import shlex
import subprocess

from plan_helpers import write_planned_build

from buildgen.ninja.tool import ninja_binary


def _ninja(build_dir, *args):
    return subprocess.run(
        [ninja_binary(), "-C", str(build_dir), *args], capture_output=True, text=True
    )


def test_dry_run_plans_every_action_once(tmp_path, planned):
    plan, files = planned
    build = write_planned_build(tmp_path)
    done = _ninja(build, "-n")
    assert done.returncode == 0, done.stdout + done.stderr
    printed = [line.split("] ", 1)[1] for line in done.stdout.splitlines() if line.startswith("[")]
    # Before a first build, the dyndep files gen stands in list every kernels object a link
    # may take. Nothing needs the c host's archive of them (for CMake, and `ninja <it>`).
    kernels_archives = {a.outputs[0] for a in plan.actions if a.rule == "ar"
                        and a.outputs[0].startswith("_shared/c-")}
    expected = [a.description for a in plan.actions
                if a.rule != "gen" and a.outputs[0] not in kernels_archives]
    assert len(kernels_archives) == 2
    assert sorted(printed) == sorted(expected)


def test_the_graph_links_libraries_to_objects_and_objects_to_weights(tmp_path, planned):
    plan, files = planned
    build = write_planned_build(tmp_path)
    lib = _ninja(build, "-t", "query", "mlp/cpu/libmlp.so").stdout
    assert "mlp/cpu/obj/weights.o" in lib and "mlp/cpu/obj/model.o" in lib
    weights = _ninja(build, "-t", "inputs", "mlp/cpu/obj/weights.o").stdout.split()
    assert "mlp/weights.bin" in weights and "mlp/cpu/src/weights.S" in weights


def test_commands_receive_odd_paths_intact(tmp_path, planned):
    plan, files = planned
    build = write_planned_build(tmp_path)
    done = _ninja(build, "-t", "commands", "-s", "mlp/graph.json")
    assert done.returncode == 0, done.stderr
    argv = shlex.split(done.stdout.strip())
    assert argv[:6] == ["/usr/bin/python3", "-m", "buildgen.stages", "--buildgen-version",
                        "9.9.9", "import"]
    assert argv[argv.index("--source") + 1] == "../my $models/mlp.onnx"

    compile_cmd = _ninja(build, "-t", "commands", "-s", "mlp/fast/obj/c.o").stdout.strip()
    argv = shlex.split(compile_cmd)
    assert "-DX=a b" in argv and "-O3" in argv
    assert argv[-7:] == ["-MD", "-MF", "mlp/fast/obj/c.o.d", "-c", "mlp/fast/src/c.c", "-o",
                         "mlp/fast/obj/c.o"]
