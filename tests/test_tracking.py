"""W&B tracking never fails a job and never needs an account."""
import logging

from pabench.tracking import Tracker, offline_runs


def test_offline_run_is_written_and_read_back(tmp_path):
    t = Tracker(mode="offline", directory=str(tmp_path), group="g", job_type="jt", name="n",
                config={"a": 1, "nested": {"b": [1, 2]}})
    t.log({"x": 1.5, "y": 2})
    t.log({"x": 3.0})
    t.finish()
    (run,) = offline_runs(tmp_path)
    assert (run["group"], run["job_type"], run["name"]) == ("g", "jt", "n")
    assert run["config"] == {"a": 1, "nested": {"b": [1, 2]}}
    assert run["metrics"] == {"x": 3.0, "y": 2}


def test_online_without_credentials_falls_back_to_offline(tmp_path, monkeypatch, caplog):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    with caplog.at_level(logging.WARNING, logger="pabench"):
        t = Tracker(mode="online", directory=str(tmp_path / "wb"), name="n")
        t.log({"x": 1})
        t.finish()
    warnings = [r for r in caplog.records if "no credentials" in r.getMessage()]
    assert len(warnings) == 1
    assert t.mode == "offline"
    assert offline_runs(tmp_path / "wb")[0]["metrics"] == {"x": 1}


def test_unwritable_directory_does_not_fail(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with caplog.at_level(logging.WARNING, logger="pabench"):
        t = Tracker(mode="offline", directory=str(blocker / "sub"), name="n")
        t.log({"x": 1})
        t.log_artifact("a", "result", [blocker])
        t.finish()
    assert not t.active
    assert any("could not start a run" in r.getMessage() for r in caplog.records)


def test_disabled_writes_nothing(tmp_path):
    t = Tracker(mode="disabled", directory=str(tmp_path / "wb"))
    t.log({"x": 1})
    t.finish()
    assert not (tmp_path / "wb").exists()
