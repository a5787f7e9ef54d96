"""The compute estimate counts the jobs the workflow runs: every job of every counted rule that a
dry run plans, and no other (natural shifts are read, not generated, and are not counted)."""
from conftest import planned, scale_config
from pabench.tools import workload
from pabench.tools.campaign import TEST


def test_counted_jobs_are_the_planned_jobs(workdir):
    config = scale_config()
    counted = {w.job for w in workload.work(config)}
    rules = {job.split()[0] for job in counted}
    natural = {f"oodrb_shift {config['oodrb']['dataset']}/{s}" for s in config["oodrb"]["natural"]}
    dag = {f"{rule} " + "/".join(v.split("=", 1)[1] for v in wildcards.split(", "))
           for rule, wildcards in planned(workdir, *TEST) if rule in rules}
    assert len(rules) >= 15 and counted == dag - natural
