"""Pre-flight checks for a run on SLURM (`--profile profiles/slurm`), before any job is submitted.

The Snakefile's `onstart` handler calls `preflight(workflow)` when the executor is `slurm`.
Snakemake runs `onstart` once, in the main process, after the DAG is built and before the
scheduler submits the first job (jobs themselves run with `--no-hooks`; a dry run skips it). It
stops the run with one message listing every problem found:

- Slurm does not answer (`sinfo` missing or failing), e.g. on a machine outside the cluster;
- a resource key neither Snakemake nor the SLURM executor plugin knows (a typo such as
  `slurm_partiton` in a profile or `--set-resources` would otherwise be silently ignored);
- an account or partition taken from an environment variable that is not set (the profile's
  `$PABENCH_SLURM_ACCOUNT` left unexpanded);
- a job asking for GPUs on a partition without any (it would wait in the queue forever or be
  refused by sbatch only after the jobs before it ran).
"""
from __future__ import annotations

import os
import subprocess

# Resources Snakemake itself defines (sizes in every unit it converts between, its internal
# _cores/_nodes, tmpdir) and those the SLURM executor plugin 2.x turns into sbatch options.
SNAKEMAKE_RESOURCES = {"_cores", "_nodes", "tmpdir", "runtime", "mem", "mem_mb", "mem_mib",
                       "disk", "disk_mb", "disk_mib"}
PLUGIN_RESOURCES = {"slurm_partition", "slurm_account", "slurm_extra", "slurm_cluster", "cluster",
                    "clusters", "constraint", "qos", "nodes", "tasks", "tasks_per_node",
                    "tasks_per_gpu", "mpi", "cpus_per_task", "cpus_per_gpu", "mem_mb_per_cpu",
                    "gpu", "gpu_model", "gres"}
KNOWN_RESOURCES = SNAKEMAKE_RESOURCES | PLUGIN_RESOURCES


class PreflightError(Exception):
    pass


def sinfo(timeout: float = 30) -> str:
    """`sinfo`'s partitions and their generic resources, one `name|gres` line each (the default
    partition's name ends in `*`)."""
    try:
        proc = subprocess.run(["sinfo", "--noheader", "--format=%P|%G"], capture_output=True,
                              text=True, timeout=timeout)
    except FileNotFoundError:
        raise PreflightError("Slurm is not reachable: `sinfo` is not installed on this machine "
                             "(run Snakemake from a login node of the cluster)") from None
    except subprocess.TimeoutExpired:
        raise PreflightError(f"Slurm is not reachable: `sinfo` did not answer in {timeout:.0f} s") from None
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip() or f"exit status {proc.returncode}"
        raise PreflightError(f"Slurm is not reachable: `sinfo` failed: {detail}")
    return proc.stdout


def partitions(sinfo_text: str) -> tuple[dict[str, bool], str | None]:
    """({partition: has GPUs}, default partition) from `sinfo --format=%P|%G` output. A partition
    spans several lines when its nodes differ; it has GPUs when any of them lists a `gpu` GRES."""
    has_gpu: dict[str, bool] = {}
    default = None
    for line in sinfo_text.splitlines():
        if "|" not in line:
            continue
        name, gres = (part.strip() for part in line.split("|", 1))
        if name.endswith("*"):
            name = name[:-1]
            default = name
        gpus = any(item.startswith("gpu") for item in gres.split(","))
        has_gpu[name] = has_gpu.get(name, False) or gpus
    return has_gpu, default


def problems(jobs: list[tuple[str, dict]], sinfo_text: str | None, auto_partition: bool = False) -> list[str]:
    """What is wrong with submitting `jobs` ((rule, resources) pairs) to the cluster `sinfo_text`
    describes (None: Slurm did not answer, partitions are not checked). `auto_partition`: the
    plugin picks partitions itself (--slurm-partition-config), so jobs without a partition are
    not checked for GPUs."""
    has_gpu, default = partitions(sinfo_text or "")
    found: dict[str, None] = {}  # insertion-ordered set: one line per problem, not per job
    unknown: dict[str, list[str]] = {}  # key -> rules (a typo in default-resources hits them all)
    for rule, res in jobs:
        for key in sorted(set(res) - KNOWN_RESOURCES):
            if rule not in unknown.setdefault(key, []):
                unknown[key].append(rule)
        for key in ("slurm_account", "slurm_partition"):
            value = str(res.get(key) or "")
            if value.startswith("$"):
                found[f"{key} is {value}: environment variable {value[1:]} is not set (export it; "
                      "empty means the cluster's default)"] = None
        partition = str(res.get("slurm_partition") or "")
        if sinfo_text is None or partition.startswith("$") or partition == "<TBD>":
            continue
        if partition and partition not in has_gpu:
            found[f"rule {rule}: partition {partition!r} does not exist "
                  f"(partitions: {', '.join(has_gpu) or 'none'})"] = None
            continue
        gpus = f"gpu={res['gpu']}" if res.get("gpu") else \
            f"gres={res['gres']}" if "gpu" in str(res.get("gres") or "") else None
        if not gpus or (not partition and auto_partition):
            continue
        partition = partition or default
        if partition is None:
            found[f"rule {rule} asks for GPUs but gives no partition and the cluster has no "
                  "default one"] = None
        elif not has_gpu[partition]:
            gpu_parts = [name for name, has in has_gpu.items() if has]
            found[f"rule {rule} asks for GPUs ({gpus}) but partition {partition!r} has no "
                  f"GPUs (partitions with GPUs: {', '.join(gpu_parts) or 'none'}); set e.g. "
                  f"--set-resources {rule}:slurm_partition=<gpu partition>"] = None
    known = ", ".join(sorted(KNOWN_RESOURCES - {"_cores", "_nodes"}))
    typos = [f"unknown resource {key!r} (rules: {', '.join(rules)}); known to Snakemake and the "
             f"SLURM plugin: {known}" for key, rules in unknown.items()]
    return typos + list(found)


def with_profile_defaults(res: dict, default_args) -> dict:
    """A job's resources with the account and partition that Snakemake 9 leaves unevaluated
    ("<TBD>") until it submits the job, taken from the default-resources arguments ("name=value",
    the profile's `slurm_partition: "$PABENCH_SLURM_PARTITION"`) with environment variables
    expanded as Snakemake will; anything else stays as it is."""
    defaults = dict(arg.split("=", 1) for arg in default_args if "=" in arg)
    out = dict(res)
    for key in ("slurm_account", "slurm_partition"):
        if out.get(key) == "<TBD>" and key in defaults:
            out[key] = os.path.expandvars(defaults[key].strip().strip("'\""))
    return out


def preflight(workflow) -> None:
    """Check the jobs Snakemake is about to submit; exit with every problem found."""
    defaults = getattr(workflow.resource_settings, "default_resources", None)
    args = defaults.args if defaults else []
    jobs = [(job.rule.name, with_profile_defaults(dict(job.resources.items()), args))
            for job in workflow.dag.needrun_jobs() if not job.is_local]
    if not jobs:
        return
    settings = workflow.executor_settings
    auto = bool(getattr(settings, "partition_config", None) or os.environ.get("SNAKEMAKE_SLURM_PARTITIONS"))
    try:
        text, found = sinfo(), []
    except PreflightError as err:
        text, found = None, [str(err)]
    found += problems(jobs, text, auto_partition=auto)
    if found:
        raise PreflightError("pabench: not submitting any job to SLURM:\n"
                             + "\n".join(f"  - {line}" for line in found))
