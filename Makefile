# Two commands on a fresh machine:  `make workflow`  and  `make test`.
VENV ?= $(HOME)/.cache/pabench/venv
BIN := $(VENV)/bin
CORES ?= all

.PHONY: env workflow test bench

env:
	@bash envs/install.sh "$(VENV)"

workflow: env
	PATH="$(BIN):$$PATH" snakemake --cores $(CORES)

test: env
	PATH="$(BIN):$$PATH" python -m pytest -q -p no:cacheprovider

bench: env
	PATH="$(BIN):$$PATH" python benchmarks/bench_pa.py
	PATH="$(BIN):$$PATH" python benchmarks/bench_diagvib.py
	PATH="$(BIN):$$PATH" python benchmarks/bench_training.py
	PATH="$(BIN):$$PATH" python benchmarks/bench_attacks.py
