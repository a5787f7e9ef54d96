"""The job server (pabench.runtime.jobserver): a script run by a launcher process runs in a forked child
of a preloaded server, with the launcher's streams, directory, environment and exit status; a
cancelled launcher takes its job down; without a server the script runs in its own process."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pabench.runtime import jobserver, tracking

# slow: each test starts a job server that preloads PyTorch, or a Python process of its own.
pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only"),
              pytest.mark.slow]

SCRIPT = textwrap.dedent("""\
    from pabench.runtime.jobserver import delegate; delegate()
    import json, os, sys, time
    state = {"pid": os.getpid(), "inside": os.environ.get("PABENCH_IN_JOB_SERVER"),
             "cwd": os.getcwd(), "argv": sys.argv[1:], "mark": os.environ.get("MARK"),
             "torch_before": "torch" in sys.modules}
    if os.environ.get("SLEEP"):
        open("child.pid", "w").write(str(os.getpid()))
        time.sleep(float(os.environ["SLEEP"]))
    if os.environ.get("FAIL"):
        raise RuntimeError("the script failed")
    print(json.dumps(state))
    sys.exit(int(os.environ.get("CODE", "0")))
""")


@pytest.fixture(scope="module")
def server():
    """A job server owned by this test process, listening."""
    me = (os.getpid(), tracking.proc_stat(os.getpid())[1])
    jobserver.start(argv=["snakemake"])
    path = jobserver.address(me)
    deadline = time.monotonic() + 20
    while tracking.try_connect(path) is None:
        assert time.monotonic() < deadline, "the job server did not start"
        time.sleep(0.05)
    return {tracking.OWNER_ENV: f"{me[0]}:{me[1]}"}


def launch(tmp_path, env, *args, **extra):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    environment = {**os.environ, **env, **extra}
    environment["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return subprocess.Popen([sys.executable, str(script), *args], cwd=tmp_path, env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_script_runs_in_the_server_with_the_launchers_context(tmp_path, server):
    proc = launch(tmp_path, server, "a", "b c", MARK="m1", CODE="3")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    state = json.loads(out)
    assert state["pid"] != proc.pid and state["inside"] == "1"
    assert state["torch_before"]  # preloaded: the script did not import it
    assert state["cwd"] == str(tmp_path) and state["argv"] == ["a", "b c"] and state["mark"] == "m1"


def test_a_failing_script_prints_its_traceback_and_fails(tmp_path, server):
    proc = launch(tmp_path, server, FAIL="1")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and out == ""
    assert "RuntimeError: the script failed" in err


def test_a_cancelled_launcher_takes_its_job_down(tmp_path, server):
    proc = launch(tmp_path, server, SLEEP="120")
    pid_file = tmp_path / "child.pid"
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text()):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    child = int(pid_file.read_text())
    assert child != proc.pid
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)
    deadline = time.monotonic() + jobserver.KILL_GRACE + 10
    while Path(f"/proc/{child}").exists() and "Z" not in _state(child):
        assert time.monotonic() < deadline, "the job outlived its launcher"
        time.sleep(0.05)


def test_without_a_server_the_script_runs_in_its_own_process(tmp_path, server):
    for env in ({**server, jobserver.ENV: "0"}, {tracking.OWNER_ENV: "1:0"}):  # off; no server
        proc = launch(tmp_path, env)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        state = json.loads(out)
        assert state["pid"] == proc.pid and state["inside"] is None


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"
