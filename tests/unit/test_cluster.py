"""The SLURM pre-flight checks (pabench.tools.cluster) on fake `sinfo` output and fake commands; the
same checks against a real Slurm are in tests/slurm/test_slurm.py."""
import os
import stat

import pytest

from pabench.tools import cluster

# `sinfo --noheader --format=%P|%G` on a cluster with a default CPU partition, a GPU partition
# whose nodes differ (one line per kind of node) and a partition of GPU-less nodes.
SINFO = """cpu*|(null)
gpu|gpu:a100:4(S:0-1)
gpu|gpu:a100:2
bigmem|(null)
"""
JOB = {"_cores": 1, "_nodes": 1, "mem_mb": 2048, "mem_mib": 1954, "disk_mb": 1000, "runtime": 60,
       "tmpdir": "/tmp", "slurm_account": "", "slurm_partition": ""}


def test_partitions_from_sinfo():
    assert cluster.partitions(SINFO) == ({"cpu": False, "gpu": True, "bigmem": False}, "cpu")
    assert cluster.partitions("") == ({}, None)


def test_clean_jobs_pass():
    jobs = [("adv_data", JOB), ("adv_attack", {**JOB, "gpu": 1, "slurm_partition": "gpu"})]
    assert cluster.problems(jobs, SINFO) == []


def test_unknown_resource_key_is_named():
    # One line per key, naming every rule that has it (a typo in default-resources hits them all).
    jobs = [("adv_attack", {**JOB, "gpus": 1}), ("adv_score", {**JOB, "gpus": 1}), ("adv_attack", {**JOB, "gpus": 1})]
    [msg] = cluster.problems(jobs, SINFO)
    assert msg.startswith("unknown resource 'gpus' (rules: adv_attack, adv_score); known to Snakemake and the SLURM plugin:")
    assert " gpu," in msg


def test_gpu_rule_on_a_partition_without_gpus():
    # Asked for explicitly, or by falling back on the default partition.
    for partition in ("bigmem", ""):
        [msg] = cluster.problems([("adv_attack", {**JOB, "gpu": 1, "slurm_partition": partition})], SINFO)
        name = partition or "cpu"
        assert f"asks for GPUs (gpu=1) but partition '{name}' has no GPUs (partitions with GPUs: gpu)" in msg
    # With a partition file the plugin picks a partition per job itself.
    assert cluster.problems([("adv_attack", {**JOB, "gpu": 1})], SINFO, auto_partition=True) == []
    [msg] = cluster.problems([("adv_data", {**JOB, "slurm_partition": "gpus"})], SINFO)
    assert msg == "rule adv_data: partition 'gpus' does not exist (partitions: cpu, gpu, bigmem)"
    # A GPU asked for as a generic resource.
    [msg] = cluster.problems([("adv_attack", {**JOB, "gres": "gpu:2"})], SINFO)
    assert "rule adv_attack asks for GPUs (gres=gpu:2) but partition 'cpu' has no GPUs" in msg
    # Slurm did not answer: partitions are not checked, resource keys still are.
    assert cluster.problems([("adv_attack", {**JOB, "gpu": 1, "x": 1})], None) == [
        cluster.problems([("adv_attack", {**JOB, "x": 1})], SINFO)[0]]


def test_account_and_partition_left_unevaluated_come_from_the_profile(monkeypatch):
    """Snakemake 9 shows default resources as "<TBD>" before it submits a job: the pre-flight
    check reads the profile's environment references itself (and still checks the partition)."""
    monkeypatch.setenv("PABENCH_SLURM_PARTITION", "gpus")
    monkeypatch.delenv("PABENCH_SLURM_ACCOUNT", raising=False)
    args = ["mem_mb=min(max(2*input.size_mb, 1000), 8000)", 'slurm_account="$PABENCH_SLURM_ACCOUNT"',
            "slurm_partition=$PABENCH_SLURM_PARTITION"]
    tbd = {**JOB, "slurm_account": "<TBD>", "slurm_partition": "<TBD>", "disk_mb": "<TBD>"}
    res = cluster.with_profile_defaults(tbd, args)
    assert res["slurm_partition"] == "gpus" and res["slurm_account"] == "$PABENCH_SLURM_ACCOUNT"
    assert res["disk_mb"] == "<TBD>"   # not an account or partition: left alone
    msgs = cluster.problems([("adv_data", res)], SINFO)
    assert "environment variable PABENCH_SLURM_ACCOUNT is not set" in msgs[0]
    assert msgs[1] == "rule adv_data: partition 'gpus' does not exist (partitions: cpu, gpu, bigmem)"
    # a value Snakemake did evaluate (--set-resources) wins; one it did not is not checked
    assert cluster.with_profile_defaults({**tbd, "slurm_partition": "gpu"}, args)["slurm_partition"] == "gpu"
    assert cluster.problems([("adv_data", tbd)], SINFO) == []


def test_one_line_per_problem_not_per_job():
    jobs = [("adv_attack", {**JOB, "gpu": 1, "slurm_partition": "$PABENCH_SLURM_PARTITION"})] * 5
    [msg] = cluster.problems(jobs, SINFO)
    assert "environment variable PABENCH_SLURM_PARTITION is not set" in msg


def _fake(bin_dir, name, script):
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_unreachable_slurm(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sinfo at all
    with pytest.raises(cluster.PreflightError, match="`sinfo` is not installed"):
        cluster.sinfo()
    _fake(tmp_path, "sinfo", "echo 'slurm_load_partitions: Unable to contact slurm controller' >&2; exit 1\n")
    with pytest.raises(cluster.PreflightError, match="`sinfo` failed: slurm_load_partitions: Unable to contact"):
        cluster.sinfo()
    _fake(tmp_path, "sinfo", "exec /bin/sleep 5\n")
    with pytest.raises(cluster.PreflightError, match="did not answer in 1 s"):
        cluster.sinfo(timeout=1)
    _fake(tmp_path, "sinfo", f"printf '{SINFO}'\n")
    assert cluster.partitions(cluster.sinfo())[1] == "cpu"
    assert os.environ["PATH"] == str(tmp_path)
