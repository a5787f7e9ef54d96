"""The workflow's glibc malloc settings: what goes into GLIBC_TUNABLES, and that a process
started with them reuses freed memory instead of faulting it in again."""
import os
import subprocess
import sys

import pytest

from pabench.runtime import allocator

OURS = ":".join(f"{k}={v}" for k, v in allocator.TUNABLES.items())


def test_configure_sets_the_tunables_in_an_empty_environment():
    env = {}
    assert allocator.configure(env) == OURS
    assert env[allocator.ENV] == OURS


def test_configure_keeps_other_tunables_and_a_users_malloc_settings():
    env = {allocator.ENV: "glibc.pthread.rseq=0"}
    allocator.configure(env)
    assert env[allocator.ENV] == f"glibc.pthread.rseq=0:{OURS}"
    mine = "glibc.malloc.arena_max=2"
    env = {allocator.ENV: mine}
    assert allocator.configure(env) == mine
    assert env[allocator.ENV] == mine


def test_configure_can_be_switched_off():
    env = {allocator.SWITCH: "0"}
    assert allocator.configure(env) is None
    assert allocator.ENV not in env


# 20 times a 40 MiB array (over glibc's largest automatic mmap threshold, 32 MiB), written and
# freed: with glibc's defaults each is mapped afresh and faulted in; with ours, reused.
FAULTS = """
import resource, numpy as np
a = np.ones(40 << 18, np.float32); del a
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    a = np.ones(40 << 18, np.float32); del a
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(tuned: bool) -> int:
    env = {k: v for k, v in os.environ.items() if k not in (allocator.ENV, allocator.SWITCH)}
    if tuned:
        allocator.configure(env)
    out = subprocess.run([sys.executable, "-c", FAULTS], env=env, check=True, text=True,
                         capture_output=True).stdout
    return int(out.split()[-1])


def test_a_process_started_with_the_settings_reuses_freed_memory():
    default = _faults(False)
    if default < 1000:
        pytest.skip(f"this C library faulted only {default} pages with its defaults")
    assert _faults(True) * 10 < default
