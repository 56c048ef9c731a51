"""The build plan: actions, commands, dependencies and descriptions, checked as data."""

import dataclasses
import json

import pytest
from plan_helpers import host_objects, make_context, make_models, make_targets

from buildgen.ninja.actions import plan_build
from buildgen.ninja.cache_plan import with_cache
from buildgen.ninja.emit import emit
from buildgen.ninja.layout import TargetFiles
from buildgen.ninja.plan import Pool
from buildgen.targets import ResolvedTarget, get_kind


def _descriptions(plan):
    return sorted(a.description for a in plan.actions)


def test_every_stage_has_one_readable_action_per_model_and_target(planned):
    plan, _ = planned
    labels = ("cnn/cpu", "mlp/cpu", "mlp/fast")
    # Besides, each c toolchain's shared kernels (one set for cpu's levels, one for fast).
    shared = [d for d in _descriptions(plan) if d.split()[1].startswith("_shared/")]
    levels = len(host_objects("mlp/cpu")) + len(host_objects("mlp/fast"))
    sources = get_kind("c").shared_kernels.sources
    assert len([d for d in shared if d.startswith("CC ")]) == levels * len(sources)
    assert len([d for d in shared if d.startswith("AR ")]) == 2
    assert [d for d in _descriptions(plan) if d not in shared] == sorted([
        "GEN build.ninja",
        "IMPORT cnn", "IMPORT mlp",
        *[f"{verb} {label}" for label in labels
          for verb in ("PARTITION", "CODEGEN c", "EXECUTOR", "REPORT")],
        *[f"KERNELS {label} c" for label in labels],
        *[f"CC {label} {obj}" for label in labels
          for obj in (*host_objects(label), "model.o", "weights.o")],
        *[f"LINK {label} lib{label.split('/')[0]}.so" for label in labels],
        *[f"AR {label} lib{label.split('/')[0]}.a" for label in labels],
    ])


def test_import_puts_shapes_on_the_command_line_and_reads_the_source(planned):
    plan, _ = planned
    action = plan.action_for("mlp/graph.json")
    assert action.outputs == ("mlp/graph.json", "mlp/weights.bin", "mlp/constants.bin")
    assert action.inputs == ("../my $models/mlp.onnx",)
    args = action.variable("args")
    assert args[args.index("--input") + 1] == "x=2,4"
    assert action.variable("dep") == "mlp/graph.json.d"
    rule = plan.rule(action.rule)
    assert (rule.depfile, rule.deps, rule.restat) == ("$dep", "gcc", True)


def test_stage_commands_carry_the_buildgen_version(planned):
    plan, _ = planned
    stages = dict(plan.variables)["stages"]
    assert stages == ("/usr/bin/python3", "-m", "buildgen.stages", "--buildgen-version", "9.9.9")
    for name in ("import", "partition", "codegen", "executor", "report"):
        rule = plan.rule(name)
        assert rule.command == f"$stages {name} $args" and rule.restat


def test_partition_reads_the_code_affecting_view_not_target_json(planned):
    plan, files = planned
    action = plan.action_for("mlp/fast/partition.json")
    assert "_targets/fast/options/target.json" in action.inputs
    assert "_targets/fast/target.json" not in action.inputs
    args = action.variable("args")
    assert args[args.index("--pin") + 1] == "/fc2/Gemm=c"
    view = json.loads(files["_targets/fast/options/target.json"])["host"]
    full = json.loads(files["_targets/fast/target.json"])["host"]
    assert "opt_level" in full and "opt_level" not in view and "cflags" not in view


def test_one_codegen_action_per_backend_with_its_options_file(planned):
    plan, files = planned
    action = plan.action_for("mlp/cpu/src/c.c")
    assert action.inputs == (
        "mlp/graph.json", "mlp/constants.bin", "mlp/cpu/partition.json",
        "_targets/cpu/options/c.json",
    )
    # A large weight read after all reaches the depfile (buildgen/ir/constants.py).
    assert action.variable("dep") == "mlp/cpu/src/c.c.d"
    assert plan.rule(action.rule).deps == "gcc"
    assert json.loads(files["_targets/cpu/options/c.json"])["backend"] == "c"


def test_compiles_put_flags_on_the_command_line_and_use_gcc_deps(planned):
    plan, _ = planned
    cpu = plan.action_for(f"mlp/cpu/obj/{host_objects('mlp/cpu')[-1]}")
    fast = plan.action_for("mlp/fast/obj/c.o")
    assert "-O2" in cpu.variable("cflags") and "-O3" in fast.variable("cflags")
    assert "-DX=a b" in fast.variable("cflags")  # one argument, quoted once when written
    assert "-march=x86-64-v3" in fast.variable("cflags")
    assert cpu.variable("includes") == ("-I../pkg/include", "-Imlp/cpu/include")
    assert cpu.order_only == ("mlp/cpu/include/mlp.h",)
    rule = plan.rule(cpu.rule)
    assert (rule.deps, rule.depfile) == ("gcc", "$out.d")
    assert "$cflags" in rule.command
    # A C compile may be started before its cache lookup (Toolchain.stoppable).
    assert cpu.variable("stoppable") == ("--stoppable",)


def test_weights_object_depends_on_weights_bin(planned):
    plan, _ = planned
    action = plan.action_for("mlp/cpu/obj/weights.o")
    assert action.inputs == ("mlp/cpu/src/weights.S",)
    assert action.implicit == ("mlp/weights.bin",)


def test_links_take_every_object_and_the_archive_is_deterministic(planned):
    plan, _ = planned
    objects = (*(f"mlp/cpu/obj/{o}" for o in host_objects("mlp/cpu")), "mlp/cpu/obj/model.o",
               "mlp/cpu/obj/weights.o")
    shared = plan.action_for("mlp/cpu/libmlp.so")
    assert shared.inputs == objects
    assert shared.variable("ldflags") == ("-lm", "-pthread")
    assert plan.action_for("mlp/cpu/libmlp.a").inputs == objects
    assert "rcsD" in plan.rule("ar").command


def test_links_take_the_kernels_objects_the_codegen_lists(planned, tmp_path):
    """The c host's shared kernels: the codegen lists the sources its module needs, the
    link_kernels action names their objects (a dyndep file for ninja, a response file for
    the link and ar); the eager ones (the GEMM) are built from the start."""
    plan, files = planned
    codegen = plan.action_for("mlp/cpu/src/c.c")
    args = codegen.variable("args")
    assert args[args.index("--kernels-linked") + 1] == "mlp/cpu/src/c.kernels.txt"
    assert "mlp/cpu/src/c.kernels.txt" in codegen.outputs
    links = plan.action_for("mlp/cpu/src/c.link.dd")
    # Which object each source has at each level: gen's file, one per target.
    objects = "_targets/cpu/kernels/c.objects"
    assert links.rule == "link_kernels"
    assert links.inputs == ("mlp/cpu/src/c.kernels.txt", objects)
    assert links.outputs == ("mlp/cpu/src/c.link.dd", "mlp/cpu/src/c.link.rsp")
    named = {line.split("=")[1] for line in files[objects].split()}
    (kernels,) = [a for a in plan.actions if a.rule == "ar" and set(a.inputs) == named]
    eager = tuple(obj for obj in kernels.inputs if "_threads." in obj or "_gemm." in obj)
    assert len(eager) == 2 * len(host_objects("mlp/cpu"))
    for library in ("mlp/cpu/libmlp.so", "mlp/cpu/libmlp.a"):
        link = plan.action_for(library)
        assert link.dyndep == "mlp/cpu/src/c.link.dd"
        assert link.response_files == ("mlp/cpu/src/c.link.rsp",)
        assert link.dynamic_inputs == kernels.inputs and link.order_only == eager
        assert "$response_files" in plan.rule(link.rule).command
    # The action cache hashes what the response file lists (buildgen.cache.action).
    text = emit(with_cache(plan, make_context(tmp_path)), "9.9.9")
    edge = text.split("build mlp/cpu/libmlp.so: ", 1)[1].split("\n\n", 1)[0]
    assert "  dyndep = mlp/cpu/src/c.link.dd" in edge
    assert "  response_files = @mlp/cpu/src/c.link.rsp" in edge
    assert "  implicit_in = @mlp/cpu/src/c.link.rsp mlp/cpu/src/c.link.dd" in edge


def test_generator_edge_declares_gen_outputs_and_inputs(planned):
    plan, files = planned
    gen = plan.action_for("build.ninja")
    assert set(gen.implicit_outputs) == set(files)
    assert gen.inputs == ("../BUILD.yaml",)
    assert gen.implicit == ("../pkg/__init__.py", "../rules", "../rules/c.yaml")
    rule = plan.rule(gen.rule)
    assert rule.generator and rule.restat


def test_phony_targets_and_default(planned):
    plan, _ = planned
    phonies = {p.name: p.inputs for p in plan.phonies}
    assert phonies["all"] == ("cnn", "mlp")
    assert phonies["mlp"] == ("mlp-cpu", "mlp-fast")
    files = TargetFiles("mlp", "fast")
    assert set(phonies["mlp-fast"]) == {
        files.shared_lib, files.static_lib, files.header, files.report_json, files.report_md
    }
    assert plan.defaults == ("all",)


def test_emit_is_sorted_and_deterministic(planned):
    plan, _ = planned
    reordered = type(plan)(
        plan.variables, plan.pools, tuple(reversed(plan.rules)), tuple(reversed(plan.actions)),
        tuple(reversed(plan.phonies)), plan.defaults,
    )
    text = emit(plan, "9.9.9")
    assert text == emit(reordered, "9.9.9")
    assert text.startswith("# buildgen build.ninja format 1, generated by buildgen 9.9.9.\n")
    assert "\nninja_required_version = 1.10\n" in text
    assert ("build mlp/graph.json mlp/weights.bin mlp/constants.bin: import "
            "../my$ $$models/mlp.onnx\n") in text
    assert "--source '../my $$models/mlp.onnx'" in text


class _PooledTarget(ResolvedTarget):
    """A target whose compiler must run in a bounded pool (as nvcc does)."""

    def toolchain(self, kind):
        return dataclasses.replace(super().toolchain(kind), pool="heavy")


def test_toolchain_pools_are_declared_with_the_configured_depth(tmp_path):
    base = make_targets()["cpu"]
    target = _PooledTarget(base.name, base.host, base.device, base.accelerators)
    model = make_models(tmp_path)[0]
    ctx = dataclasses.replace(make_context(tmp_path), pool_depths=(("heavy", 2),))
    plan = plan_build([model], {"cpu": target}, ctx, ())
    assert plan.pools == (Pool("heavy", 2),)
    cnn_c = f"cnn/cpu/obj/{host_objects('cnn/cpu')[0]}"
    assert plan.action_for(cnn_c).pool == "heavy"
    text = emit(plan, "9.9.9")
    assert "pool heavy\n  depth = 2\n" in text
    assert f"build {cnn_c}: cc cnn/cpu/src/c.c || cnn/cpu/include/cnn.h\n" in text
    assert "  pool = heavy\n" in text


def test_the_report_ignores_compile_only_attributes(planned):
    plan, _ = planned
    action = plan.action_for("mlp/fast/report.json")
    # The code-affecting view of the target, and the options files of kinds whose memory
    # plan depends on them (rules `memory_options`; not the c host's): no compile flag.
    assert action.inputs == (
        "_targets/fast/options/target.json", "mlp/graph.json", "mlp/constants.bin",
        "mlp/fast/partition.json",
    )


def test_evolve_is_replace_for_every_field_and_refuses_others(planned):
    plan, _ = planned
    action = plan.action_for("mlp/fast/report.json")
    for field in dataclasses.fields(action):
        value = (None if field.name in ("pool", "dyndep") else
                 "x" if field.type == "str" else ("x",))
        evolved = action.evolve(**{field.name: value})
        assert evolved == dataclasses.replace(action, **{field.name: value})
        assert hash(evolved) == hash(dataclasses.replace(action, **{field.name: value}))
    assert action.evolve() == action and action.evolve() is not action
    with pytest.raises(TypeError, match="no field 'input'"):
        action.evolve(input=("x",))
