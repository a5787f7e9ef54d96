"""W&B tracking never fails a job and never needs an account."""
import logging
import sys

import pytest

from pabench.runtime.tracking import Tracker, offline_runs


def test_offline_run_is_written_and_read_back(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="pabench"):
        t = Tracker(mode="offline", directory=str(tmp_path), group="g", job_type="jt", name="n",
                    config={"a": 1, "nested": {"b": [1, 2]}})
    assert t.active, caplog.text
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


def test_disabled_tracking_works_without_wandb_installed(tmp_path, monkeypatch):
    """A machine without wandb (e.g. a GPU node) runs the jobs with W&B disabled: no method
    imports it."""
    import pandas as pd

    monkeypatch.setitem(sys.modules, "wandb", None)      # `import wandb` now raises ImportError
    t = Tracker(mode="disabled", directory=str(tmp_path / "wb"))
    (tmp_path / "f.txt").write_text("x")
    t.log({"x": 1})
    t.log_table("t", pd.DataFrame({"a": [1]}))
    t.log_image("i", tmp_path / "f.txt")
    t.log_artifact("a", "result", [tmp_path / "f.txt"])
    t.use_artifact("a", "result", [tmp_path / "f.txt"])
    t.finish()


def test_a_failed_start_is_retried_once_and_its_partial_run_removed(tmp_path, monkeypatch, caplog):
    import wandb

    real_init, calls = wandb.init, []

    def flaky_init(**kwargs):
        calls.append(1)
        if len(calls) == 1:  # leave a half-made run directory behind, as a crashed start does
            (tmp_path / "wandb" / "offline-run-19700101_000000-broken").mkdir(parents=True)
            raise TimeoutError("service did not start")
        return real_init(**kwargs)

    monkeypatch.setattr(wandb, "init", flaky_init)
    with caplog.at_level(logging.WARNING, logger="pabench"):
        t = Tracker(mode="offline", directory=str(tmp_path), name="n")
        t.log({"x": 1})
        t.finish()
    assert len(calls) == 2 and "retrying once" in caplog.text
    (run,) = offline_runs(tmp_path)
    assert run["name"] == "n" and run["metrics"] == {"x": 1}


def test_a_run_log_without_run_record_is_reported(tmp_path):
    run_dir = tmp_path / "wandb" / "offline-run-x"
    run_dir.mkdir(parents=True)
    (run_dir / "run-x.wandb").write_bytes(b":W&B\xce\xbe\x00")
    with pytest.raises(ValueError, match="no run record"):
        offline_runs(tmp_path)


def test_unreachable_server_falls_back_to_offline(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("WANDB_API_KEY", "pabench-fake-key-0123456789abcdef0123456789")
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # nothing listens on the discard port
    with caplog.at_level(logging.WARNING, logger="pabench"):
        t = Tracker(mode="online", directory=str(tmp_path), name="n")
        t.log({"x": 1})
        t.finish()
    assert t.mode == "offline" and "cannot be reached" in caplog.text
    assert offline_runs(tmp_path)[0]["metrics"] == {"x": 1}


def test_unknown_mode_disables_tracking_with_a_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="pabench"):
        t = Tracker(mode="onlnie", directory=str(tmp_path / "wb"))
        t.log({"x": 1})
        t.finish()
    assert t.mode == "disabled" and "unknown mode 'onlnie'" in caplog.text
    assert not (tmp_path / "wb").exists()
