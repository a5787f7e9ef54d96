# Two commands on a fresh machine:  `make workflow`  and  `make test`.
VENV ?= $(HOME)/.cache/pabench/venv
BIN := $(VENV)/bin
CORES ?= all

.PHONY: env browser workflow test test-fast test-slurm test-slurm-ci rehearsal report bench

env:
	@bash envs/install.sh "$(VENV)"

# Headless Chromium for the report test (best effort; the test says why when it is skipped).
browser:
	@bash envs/install-browser.sh

workflow: env
	PATH="$(BIN):$$PATH" snakemake --cores $(CORES)

# Everything (unit and end-to-end workflow tests), under 10 minutes on 2 cores: on every core
# (at most 4 workers); the tests that read the session's shared test-scale run on one worker,
# each file's other tests together (tests/conftest.py).
test: env browser
	PATH="$(BIN):$$PATH" python -m pytest -q -p no:cacheprovider -n auto --maxprocesses 4 --dist loadgroup tests

# The unit tests only, those marked slow left out (no Snakemake run, no subprocess or job server,
# no large model: `make test` runs them), on every core (at most 4 workers; pytest-xdist).
test-fast: env
	PATH="$(BIN):$$PATH" python -m pytest -q -p no:cacheprovider -n auto --maxprocesses 4 -m "not slow" tests/unit

# The SLURM profile on a real single-node Slurm (Debian's packages, installed if missing, started
# and always stopped by tests/slurm/cluster.sh; needs root): the test-scale workflow through
# `--executor slurm` equals a local run, a failing job is reported, bad input is refused before
# any job is submitted. Not part of `make test` (docs/cluster.md: how long it takes).
test-slurm: env
	PATH="$(BIN):$$PATH" PABENCH_SLURM=1 bash tests/slurm/cluster.sh run \
		python -m pytest -q -s --durations=0 -p no:cacheprovider tests/slurm

# The same tests on the two toy figures' jobs only (.ci/run runs it after `make test`).
test-slurm-ci: env
	PATH="$(BIN):$$PATH" PABENCH_SLURM=1 PABENCH_SLURM_TARGETS="figures/pa/fig1.pdf figures/pa/fig2.pdf" \
		bash tests/slurm/cluster.sh run python -m pytest -q -s -p no:cacheprovider tests/slurm

# Snakemake's offline HTML report of the current results (figures, tables, claims, timings).
report: env
	PATH="$(BIN):$$PATH" snakemake --report report.html

# Every paper-scale rule on stand-in inputs, small sizes and random RobustBench weights, in
# ./rehearsal (workflow/config/rehearsal.yaml; about 30 minutes on 2 cores).
rehearsal: env
	PATH="$(BIN):$$PATH" python -m pabench.tools.rehearsal --dir rehearsal --cores $(CORES)

bench: env
	PATH="$(BIN):$$PATH" python benchmarks/bench_pa.py
	PATH="$(BIN):$$PATH" python benchmarks/bench_diagvib.py
	PATH="$(BIN):$$PATH" python benchmarks/bench_training.py
	PATH="$(BIN):$$PATH" python benchmarks/bench_attacks.py
	PATH="$(BIN):$$PATH" python benchmarks/bench_job_overhead.py
	PATH="$(BIN):$$PATH" python benchmarks/bench_job_server.py
	PATH="$(BIN):$$PATH" python benchmarks/bench_inference.py
	PATH="$(BIN):$$PATH" python benchmarks/bench_allocator.py
	PATH="$(BIN):$$PATH" python benchmarks/bench_avgcase.py
	PATH="$(BIN):$$PATH" python benchmarks/bench_corruptions.py
	PATH="$(BIN):$$PATH" python benchmarks/bench_mm5.py
	PATH="$(BIN):$$PATH" python benchmarks/bench_compute.py
