"""What re-runs the partition: its real inputs, and nothing else."""

import pytest
from partition_plugin import TABLES
from test_partition_cli import _project

from buildgen.cli import main

pytestmark = pytest.mark.slow


def _rebuild(manifest, capfd) -> str:
    capfd.readouterr()
    assert main(["build", "--manifest", str(manifest)]) == 0
    return capfd.readouterr().out


def test_priority_partition_reruns_on_a_pattern_table_change_only(plugin, tmp_path, capfd):
    manifest = _project(tmp_path)
    assert "PARTITION blocks/fast" in _rebuild(manifest, capfd)
    # A compile flag of the host: recompiles, never re-partitions.
    manifest.write_text(manifest.read_text().replace("opt_level: 1", "opt_level: 2"))
    out = _rebuild(manifest, capfd)
    assert "CC blocks/fast" in out and "PARTITION" not in out
    # A change to an accelerator's pattern table re-partitions (and only that model's
    # partition: the import does not run again).
    plugin({"tvec": TABLES["tvec"].replace("priority: 5", "priority: 6")})
    out = _rebuild(manifest, capfd)
    assert "PARTITION blocks/fast" in out and "IMPORT" not in out


def test_cost_partition_reruns_on_new_records_and_on_options(plugin, tmp_path, capfd):
    records = tmp_path / "cpu.records.json"
    records.write_text('{"format": "buildgen-tuning-records", "version": 1, "records": [\n]}\n')
    manifest = _project(tmp_path, partition="{policy: cost, records: cpu.records.json}")
    assert "PARTITION blocks/fast" in _rebuild(manifest, capfd)
    assert "PARTITION" not in _rebuild(manifest, capfd)
    records.write_text(records.read_text() + "\n")  # new bytes: read again
    assert "PARTITION blocks/fast" in _rebuild(manifest, capfd)
    # Every option is part of a record's key, so a compile flag re-runs the cost policy.
    manifest.write_text(manifest.read_text().replace("opt_level: 1", "opt_level: 2"))
    assert "PARTITION blocks/fast" in _rebuild(manifest, capfd)


def test_records_named_before_they_exist_build_and_are_read_once_written(
    plugin, tmp_path, capfd
):
    """A manifest may name the records `buildgen tune` will write: until then the model has
    no records, and the file appearing re-runs gen (watching the nearest folder) and the
    partition, once."""
    manifest = _project(tmp_path, partition="{policy: cost, records: tuning/cpu.records.json}")
    out = _rebuild(manifest, capfd)
    assert "PARTITION blocks/fast" in out and "LINK" in out
    assert "GEN" not in (out := _rebuild(manifest, capfd)) and "PARTITION" not in out
    records = tmp_path / "tuning" / "cpu.records.json"
    records.parent.mkdir()
    out = _rebuild(manifest, capfd)
    assert "GEN" in out and "PARTITION" not in out  # now watching tuning/
    records.write_text('{"format": "buildgen-tuning-records", "version": 1, "records": [\n]}\n')
    out = _rebuild(manifest, capfd)
    assert "PARTITION blocks/fast" in out and "IMPORT" not in out and "LINK" not in out
    assert "PARTITION" not in _rebuild(manifest, capfd)
    build_ninja = (tmp_path / "build" / "build.ninja").read_text()
    assert "--records ../tuning/cpu.records.json" in build_ninja
    records.write_text(records.read_text() + "\n")  # from now on, an input like any other
    assert "PARTITION blocks/fast" in _rebuild(manifest, capfd)
