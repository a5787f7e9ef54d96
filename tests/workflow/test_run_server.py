"""The run server end to end: a Snakemake `script:` rule inside pabench.runtime.workflow.job hands its
W&B run to the server (tests/unit/test_job_overhead.py has the server's parts without Snakemake)."""
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pabench.runtime import tracking
from pabench.runtime.tracking import offline_runs

pytestmark = [pytest.mark.workflow,
              pytest.mark.skipif(not sys.platform.startswith("linux"),
                                 reason="the run server is used on Linux only")]


@pytest.mark.parametrize("early", [False, True], ids=["started-by-a-job", "start_server"])
def test_a_snakemake_job_uses_the_server(tmp_path, early):
    """End to end: a `script:` rule inside job(); its process never imports wandb and its run is
    complete when Snakemake ends; the server is started by the first job, or by the Snakefile."""
    snakemake = shutil.which("snakemake", path=str(Path(sys.executable).parent))
    if snakemake is None:
        pytest.skip("snakemake is not installed")
    (tmp_path / "Snakefile").write_text(textwrap.dedent("""
        config["wandb"] = {"mode": "offline", "dir": "data/wandb"}
        config["scale"] = "test"
        if EARLY:
            from pabench.runtime import tracking
            tracking.start_server(config)
        rule all:
            input: "a.json", "b.json"
        rule one:
            output: "{name}.json"
            params: experiment="overhead"
            log: "logs/{name}.log"
            script: "job.py"
        """).replace("EARLY", str(early)))
    (tmp_path / "job.py").write_text(textwrap.dedent("""
        import json, sys
        from pabench.runtime.workflow import job
        with job(snakemake) as run:
            run.log({"x": 1.0})
            json.dump({"wandb": "wandb" in sys.modules, "tracker": type(run).__name__},
                      open(snakemake.output[0], "w"))
        """))
    src = str(tracking.SRC)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    env.pop(tracking.SERVER_ENV, None)
    proc = subprocess.run([snakemake, "--cores", "2"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("a", "b"):
        assert json.loads((tmp_path / f"{name}.json").read_text()) == {
            "wandb": False, "tracker": "RemoteTracker"}
    runs = offline_runs(tmp_path / "data" / "wandb")
    assert sorted(r["name"] for r in runs) == ["one-name=a", "one-name=b"]
    assert all(r["job_type"] == "one" and r["group"] == "overhead" and r["metrics"] == {"x": 1.0}
               and [a["name"] for a in r["artifacts"]] == [r["name"][9:] + ".json"]
               for r in runs)
