"""Per-job overhead: a job hands its W&B run to the workflow's run server and never imports wandb
itself; the run it leaves is the one an in-process run leaves (read back the same), its warnings
still reach the job's log, and the server never outlives the Snakemake process it serves.  The same
through a real Snakemake run: tests/workflow/test_run_server.py."""
import logging
import os
import subprocess
import sys
import time

import pytest

from pabench.runtime import tracking
from pabench.runtime.tracking import RemoteTracker, Tracker, offline_runs, open_run

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the run server is used on Linux only")


def identity(pid):
    return pid, tracking.proc_stat(pid)[1]


@pytest.fixture
def owner():
    """A stand-in for the Snakemake process a server belongs to."""
    proc = subprocess.Popen(["sleep", "300"])
    yield identity(proc.pid)
    proc.kill()
    proc.wait()


def log_everything(t, tmp_path):
    import pandas as pd

    image = tmp_path / "img.png"
    image.write_bytes(_png())
    out = tmp_path / "out.csv"
    out.write_text("a,b\n1,2\n")
    t.log({"x": 1.5, "y": 2})
    t.log({"x": 3.0})
    t.log_table("tab", pd.DataFrame({"a": [1, 2], "b": ["u", "v"]}))
    t.log_image("fig", image)
    t.log_artifact("figures/pa/out.csv", "figure", [out])
    t.finish()


def _png() -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import io

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def comparable(run):
    run = dict(run)
    run.pop("dir")
    run["artifacts"] = [a for a in run["artifacts"] if a["type"] != "run_table"]  # named by run id
    return run


@pytest.mark.slow
def test_a_served_run_reads_back_like_an_in_process_one(tmp_path, owner, monkeypatch):
    kwargs = dict(group="g", job_type="jt", name="n", config={"a": 1, "nested": {"b": [1, 2]}},
                  tags=["test"])
    # An in-process run sets these for its process (WANDB_SERVICE: its wandb-core).
    for var in ("WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_ARTIFACT_DIR",
                "WANDB_SERVICE"):
        monkeypatch.delenv(var, raising=False)
    remote = open_run(mode="offline", owner=owner, directory=str(tmp_path / "remote"), **kwargs)
    assert isinstance(remote, RemoteTracker)
    log_everything(remote, tmp_path)
    # wandb's staging and cache stay inside the run directory root, as in-process
    assert list((tmp_path / "remote" / "cache").rglob("core-debug-*.log"))
    local = Tracker(mode="offline", directory=str(tmp_path / "local"), **kwargs)
    log_everything(local, tmp_path)
    (a,), (b,) = offline_runs(tmp_path / "local"), offline_runs(tmp_path / "remote")
    assert comparable(a) == comparable(b)
    assert b["metrics"] == {"x": 3.0, "y": 2} and set(b["media"]) == {"tab", "fig"}


@pytest.mark.slow
def test_warnings_of_a_served_run_reach_the_job_log(tmp_path, owner, caplog):
    with caplog.at_level(logging.WARNING, logger="pabench"):
        t = open_run(mode="offline", owner=owner, directory=str(tmp_path), name="n")
        t.log({"x": 1})
        t.log_artifact("gone", "file", [tmp_path / "missing.txt"])
        t.finish()
    assert "artifact gone failed (FileNotFoundError" in caplog.text
    assert offline_runs(tmp_path)[0]["metrics"] == {"x": 1}


@pytest.mark.slow
def test_a_job_that_dies_leaves_its_run_marked_failed(tmp_path, owner):
    from wandb.proto import wandb_internal_pb2 as pb

    t = open_run(mode="offline", owner=owner, directory=str(tmp_path), name="n")
    t.log({"x": 1})
    t._chan.sock.close()  # as if the job were killed
    deadline = time.monotonic() + 60
    exits = []
    while not exits and time.monotonic() < deadline:
        time.sleep(0.2)
        for log in (tmp_path / "wandb").glob("offline-run-*/*.wandb"):
            for payload in tracking._records(log):
                rec = pb.Record()
                rec.ParseFromString(payload)
                if rec.WhichOneof("record_type") == "exit":
                    exits.append(rec.exit.exit_code)
    assert exits == [1]
    assert offline_runs(tmp_path)[0]["metrics"] == {"x": 1}


def test_no_server_without_snakemake_or_when_switched_off(tmp_path, owner, monkeypatch):
    t = open_run(mode="offline", directory=str(tmp_path / "a"), name="n")  # pytest: no Snakemake
    assert isinstance(t, Tracker)
    t.finish()
    monkeypatch.setenv(tracking.SERVER_ENV, "0")
    t = open_run(mode="offline", owner=owner, directory=str(tmp_path / "b"), name="n")
    assert isinstance(t, Tracker)
    t.finish()
    assert not isinstance(open_run(mode="disabled", owner=owner), RemoteTracker)


@pytest.mark.slow
def test_the_server_exits_with_its_owner(tmp_path):
    proc = subprocess.Popen(["sleep", "300"])
    owner = identity(proc.pid)
    t = open_run(mode="offline", owner=owner, directory=str(tmp_path), name="n")
    t.finish()
    address = tracking._server_address(owner)
    assert address.exists()
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 30
    while address.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not address.exists()
    while time.monotonic() < deadline and subprocess.run(
            ["pgrep", "-f", str(address)], capture_output=True, check=False).returncode == 0:
        time.sleep(0.1)  # its runs' wandb-core stopped, it is going
    assert subprocess.run(["pgrep", "-f", str(address)], capture_output=True,
                          check=False).returncode == 1
    assert not address.with_suffix(".lock").exists()


def test_a_job_process_imports_neither_wandb_nor_torch():
    code = "import sys, pabench.runtime.workflow; print(sorted(m for m in ('wandb', 'torch', 'pandas', " \
           "'matplotlib') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_server_that_fails_before_taking_the_run_leaves_it_to_the_job(tmp_path, owner, caplog):
    """Whatever goes wrong before the server's child has the run, the job logs it in-process."""
    import socket
    import threading

    address = tracking._server_address(owner)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(address))
    listener.listen(1)

    def broken_server():
        conn, _ = listener.accept()
        conn.recv(10)
        conn.close()  # as a server that fails in accept

    thread = threading.Thread(target=broken_server)
    thread.start()
    try:
        with caplog.at_level(logging.INFO, logger="pabench"):
            t = open_run(mode="offline", owner=owner, directory=str(tmp_path), name="n")
            assert isinstance(t, RemoteTracker)
            thread.join()
            t.log({"x": 1})
            t.log({"y": 2})
            t.finish()
    finally:
        listener.close()
        address.unlink()
    assert "logging in-process" in caplog.text and "incomplete" not in caplog.text
    (run,) = offline_runs(tmp_path)
    assert run["name"] == "n" and run["metrics"] == {"x": 1, "y": 2}


def test_a_server_of_other_code_is_not_used(tmp_path, owner, monkeypatch):
    """A job whose tracking.py changed on disk since it imported it logs in-process."""
    monkeypatch.setattr(tracking, "_STAMP", "an older version")
    t = open_run(mode="offline", owner=owner, directory=str(tmp_path), name="n")
    assert isinstance(t, Tracker)
    assert not tracking._server_address(owner).exists()
    # and a server started for other code than its own exits at once
    proc = tracking._spawn_server(tmp_path / "s.sock", owner)
    assert proc.wait(60) != 0 and not (tmp_path / "s.sock").exists()
    t.log({"x": 1})
    t.finish()
    assert offline_runs(tmp_path)[0]["metrics"] == {"x": 1}


def test_start_server_only_where_jobs_would_use_it(monkeypatch):
    me = identity(os.getpid())
    address = tracking._server_address(me)
    tracking.start_server({"wandb": {"mode": "disabled"}}, argv=["snakemake"])
    tracking.start_server({"wandb": {"mode": "offline"}}, argv=["snakemake", "-n"])
    tracking.start_server({"wandb": {"mode": "offline"}}, argv=["snakemake", "--report", "r.html"])
    monkeypatch.setenv(tracking.SERVER_ENV, "0")
    tracking.start_server({"wandb": {"mode": "offline"}}, argv=["snakemake"])
    assert not address.exists()
    monkeypatch.delenv(tracking.SERVER_ENV)
    tracking.start_server({"wandb": {"mode": "offline"}}, argv=["snakemake", "--cores", "2"])
    assert address.exists()  # it listens; it exits with this process (or when idle)
