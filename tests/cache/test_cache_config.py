"""The manifest's `cache:` section, what gen makes of it, and `buildgen cache stats|clean`."""

from __future__ import annotations

import json
import shutil

import pytest
from cache_helpers import REPO, compile_a, write_project

from buildgen.cache.settings import SETTINGS_FILE, load_settings
from buildgen.cli import main
from buildgen.errors import BuildgenError
from buildgen.manifest import load_manifest
from buildgen.ninja.gen import generate

MANIFEST = """\
buildgen: 1
cache:
  dir: .ci-cache
  max_size: 2GB
  remote: http://cache.example:8080/prefix
  read_only: true
models:
  mlp:
    source: examples/models/mlp.onnx
    inputs: {x: [8, 512]}
    targets: [c]
"""


def _project(tmp_path, manifest=MANIFEST):
    (tmp_path / "examples" / "models").mkdir(parents=True)
    shutil.copy2(REPO / "examples" / "models" / "mlp.onnx", tmp_path / "examples" / "models")
    (tmp_path / "BUILD.yaml").write_text(manifest)
    return tmp_path / "BUILD.yaml"


def _known(name: str) -> bool:
    return name == "c"


def test_the_section_is_read_with_defaults_and_paths_resolved(tmp_path):
    cache = load_manifest(_project(tmp_path), _known).cache
    assert cache.dir == tmp_path / ".ci-cache"
    assert (cache.max_size, cache.read_only) == (2 * 10**9, True)
    assert cache.remote == "http://cache.example:8080/prefix"
    without = "buildgen: 1\nmodels:" + MANIFEST.split("models:")[1]
    plain = load_manifest(_project(tmp_path / "p", without), _known).cache
    assert (plain.enabled, plain.dir, plain.max_size, plain.remote) == (True, None, None, None)


@pytest.mark.parametrize(("line", "column", "message"), [
    ("  max_size: lots", 13, "expected a size such as 2GB or 512MiB, got 'lots'"),
    ("  remote: ftp://x", 11, "expected an http:// or https:// URL"),
    ("  read_only: sometimes", 14, "expected true or false"),
    ("  size: 2GB", 3, "unknown key 'size'"),
])  # fmt: skip
def test_mistakes_are_reported_at_their_position(tmp_path, line, column, message):
    text = MANIFEST.replace("  max_size: 2GB", line)
    with pytest.raises(BuildgenError) as caught:
        load_manifest(_project(tmp_path, text), _known)
    rendered = caught.value.render()
    assert f"BUILD.yaml:4:{column}: error: cache" in rendered and message in rendered


def test_gen_puts_settings_in_a_file_and_none_in_build_ninja(tmp_path, monkeypatch):
    monkeypatch.delenv("BUILDGEN_CACHE_DIR", raising=False)
    result = generate(_project(tmp_path))
    ninja = result.build_ninja.read_text()
    assert ".ci-cache" not in ninja and "cache.example" not in ninja
    assert " exec --root .." in ninja  # the wrapper, through the worker client
    written = json.loads((result.build_dir / SETTINGS_FILE).read_text())
    assert written["dir"] == str(tmp_path / ".ci-cache")
    settings = load_settings(result.build_dir, {})
    assert settings.dir == tmp_path / ".ci-cache" and settings.read_only
    # The environment wins (CI sets it), and changes nothing ninja sees.
    assert load_settings(result.build_dir, {"BUILDGEN_CACHE_DIR": "/ci"}).dir.as_posix() == "/ci"
    assert generate(_project(tmp_path / "again")).build_ninja.read_text().count(".ci-cache") == 0


def test_stats_and_clean(tmp_path, monkeypatch, capsys):
    cache = tmp_path / "cache"
    build = write_project(tmp_path / "p")
    compile_a(build, cache)
    (build / "a.o").unlink()
    compile_a(build, cache)
    monkeypatch.setenv("BUILDGEN_CACHE_DIR", str(cache))
    monkeypatch.chdir(tmp_path)
    assert main(["cache", "stats"]) == 0
    out = capsys.readouterr().out
    assert f"cache folder: {cache}" in out
    assert "entries: 2" in out  # the object's entry and its depfile sets
    assert out.splitlines()[-1].split()[1:] == ["1", "0", "1", "50%"]  # a hit and a run
    assert main(["cache", "clean"]) == 0
    assert "removed" in capsys.readouterr().out
    assert not (cache / "cas").exists() and not (cache / "ac").exists()
    main(["cache", "stats"])
    assert "entries: 0" in capsys.readouterr().out


def test_every_action_but_gen_runs_through_the_wrapper(tmp_path):
    import shlex

    from buildgen.ninja.tool import run_ninja

    result = generate(_project(tmp_path))
    listed = run_ninja(result.build_dir, ["-t", "commands"], capture=True).stdout.splitlines()
    wrapped = [shlex.split(c) for c in listed if " exec --root " in c]
    assert len(wrapped) == len(listed) - 1  # all but gen
    assert not any(" exec " in c for c in listed if " gen " in c)
    by_output = {argv[argv.index("--out") + 1]: argv for argv in wrapped}
    weights = by_output["mlp/c/obj/weights.o"]
    # The .incbin'd weights are an implicit input: the wrapper is told, so the key covers them.
    assert weights[weights.index("--in") + 1 : weights.index("--")] == [
        "mlp/c/src/weights.S", "mlp/weights.bin",
    ]
    archive = by_output["mlp/c/libmlp.a"]
    assert archive[archive.index("--") + 1 :][:2] == ["ar", "rcsD"]  # no `rm -f ... &&`
    assert "--restat" in by_output["mlp/graph.json"] and "--restat" not in weights


def test_with_the_cache_off_build_ninja_has_todays_plain_commands(tmp_path, monkeypatch):
    monkeypatch.setenv("BUILDGEN_CACHE", "off")
    ninja = generate(_project(tmp_path / "env")).build_ninja.read_text()
    assert "buildgen.cache exec" not in ninja and "ar rcsD $out.partial/a $in" in ninja
    # the link checks its own output where no wrapper does (tests/ninja/test_link_check.py)
    assert "$ldflags && $python -m buildgen.cache.elf_check $out" in ninja
    monkeypatch.delenv("BUILDGEN_CACHE")
    manifest = MANIFEST.replace("  read_only: true\n", "  read_only: true\n  enabled: false\n")
    plain = generate(_project(tmp_path / "m", manifest)).build_ninja.read_text()
    assert "buildgen.cache exec" not in plain
    monkeypatch.setenv("BUILDGEN_CACHE", "sometimes")
    with pytest.raises(BuildgenError, match="BUILDGEN_CACHE"):
        generate(_project(tmp_path / "bad"))


def test_settings_remembered_per_process_follow_the_file_and_the_environment(tmp_path):
    """A runner resolves the settings of every action again: what it remembers is keyed
    by the file's bytes, the environment and the folder, so any change is seen."""
    settings_file = tmp_path / SETTINGS_FILE
    settings_file.parent.mkdir(parents=True)
    settings_file.write_text(json.dumps({"format": 1, "dir": "/one", "enabled": True}))
    assert str(load_settings(tmp_path, {}).dir) == "/one"
    assert load_settings(tmp_path, {}) is load_settings(tmp_path, {})  # remembered
    settings_file.write_text(json.dumps({"format": 1, "dir": "/two", "enabled": True}))
    assert str(load_settings(tmp_path, {}).dir) == "/two"
    assert not load_settings(tmp_path, {"BUILDGEN_CACHE": "off"}).enabled
    assert str(load_settings(tmp_path, {"BUILDGEN_CACHE_DIR": "/three"}).dir) == "/three"
    settings_file.write_text("{not json")
    with pytest.raises(ValueError, match="run `buildgen gen`"):
        load_settings(tmp_path, {})
    settings_file.unlink()
    assert load_settings(tmp_path, {"XDG_CACHE_HOME": "/xdg"}).dir.as_posix() == "/xdg/buildgen"
