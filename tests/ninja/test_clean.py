"""`buildgen clean` removes what the build wrote (ninja knows it all) and nothing else."""

from plan_helpers import write_planned_build

from buildgen.cli import main


def test_clean_removes_outputs_and_keeps_files_it_did_not_write(tmp_path):
    build = write_planned_build(tmp_path)
    outputs = [build / "mlp/fast/obj/c.o", build / "mlp/graph.json", build / "cnn/cpu/libcnn.so"]
    for path in outputs:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("built")
    mine = build / "mlp" / "notes.txt"
    mine.write_text("keep me")
    (build / ".ninja_log").write_text("# ninja log v7\n")

    assert main(["clean", "--build-dir", str(build)]) == 0
    assert not any(p.exists() for p in outputs)
    assert not (build / "build.ninja").exists()
    assert not (build / "_targets/cpu/target.json").exists()  # gen's files are ours too
    assert not (build / "cnn").exists()  # emptied folders go
    assert mine.read_text() == "keep me"
    assert main(["clean", "--build-dir", str(build)]) == 0  # nothing left: still fine
