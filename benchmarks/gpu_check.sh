#!/usr/bin/env bash
# The checks that need a GPU, for one short session on a GPU machine (docs/cluster.md, "Measured
# on a GPU"); the project's Python packages must already be importable there and `snakemake` on
# the PATH (carry the missing ones as wheels: the device tool's README says how).
#
#   bash benchmarks/gpu_check.sh OUTDIR rehearsal   # CUDA unit tests, MM5 vs AutoAttack, and the
#                                                   # paper-scale rehearsal on every core
#   bash benchmarks/gpu_check.sh OUTDIR bench       # paper-scale cost per pass timed on the GPU,
#                                                   # attack overhead and the PGD-1000 projection,
#                                                   # average-case Table 1 at the paper's size
#   bash benchmarks/gpu_check.sh OUTDIR rehearsal bench   # both, one after the other
#
# SKIP="bench_mm5 bench_attacks" leaves out the steps it names (ones already measured).
# Not here: benchmarks/device_agreement.py, which evaluates one checkpoint trained on the CPU
# (carried along) on both devices; see its docstring.
#
# Each step has its own time limit (seconds, scaled by LIMIT_SCALE) and its log in OUTDIR; a step
# that fails or runs out of time does not stop the next.  The rehearsal's results, figures and job
# logs come back as OUTDIR/rehearsal.tgz, to compare with a CPU run of the same commit:
#   python -m pabench.tools.compare CPU_REHEARSAL GPU_REHEARSAL --also data/results --tolerances FILE
set -u
out=${1:?usage: gpu_check.sh OUTDIR rehearsal|bench...}
shift
[ $# -gt 0 ] || { echo "usage: gpu_check.sh OUTDIR rehearsal|bench..." >&2; exit 2; }
mkdir -p "$out"
export PYTHONUNBUFFERED=1
scale=${LIMIT_SCALE:-1}

step() {   # step NAME LIMIT_S COMMAND...: run, log to OUTDIR/NAME.log, print rc, time and the tail
    local name=$1 limit=$(( $2 * scale )) start=$SECONDS rc
    shift 2
    case " ${SKIP:-} " in *" $name "*) echo "=== $name: skipped (SKIP)"; return 0 ;; esac
    echo "=== $name (limit ${limit} s, $(date +%T))"
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    echo "=== $name: exit $rc after $(( SECONDS - start )) s"
    tail -n "${TAIL:-12}" "$out/$name.log"
}

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv
python3 -c "import torch, platform; print('python', platform.python_version(), 'torch',
torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0), 'cores',
__import__('os').cpu_count())"

for part in "$@"; do
case $part in
rehearsal)
    # Correctness only (no timings), so they share the machine with the rehearsal.
    ( step cuda_tests 120 python3 -m pytest -q -p no:cacheprovider -k cuda \
          tests/unit/test_mm5.py tests/unit/test_perceptual.py tests/unit/test_threats.py \
          tests/unit/test_avgcase_estimators.py
      step bench_mm5 150 python3 benchmarks/bench_mm5.py --device cuda ) &
    step rehearsal "${REHEARSAL_LIMIT:-240}" python3 -m pabench.tools.rehearsal --dir /tmp/rehearsal \
        --cores "$(nproc)" --keep-going
    wait
    ( cd /tmp/rehearsal && tar czf "$out/rehearsal.tgz" --exclude='*.pdf' figures data/results \
          data/logs data/benchmarks .snakemake/log )
    ls -la "$out"
    ;;
bench)
    step bench_compute 200 python3 benchmarks/bench_compute.py --device cuda \
        --csv "$out/compute_gpu.csv"
    step bench_attacks 80 python3 benchmarks/bench_attacks.py --device cuda --archs wrn28_10 \
        --attacks pgd apgd-ce --batch 500 --repeats 2 --project
    step bench_runtime 150 python3 benchmarks/bench_runtime.py --device cuda
    ;;
*)
    echo "unknown part '$part' (rehearsal or bench)" >&2
    exit 2
    ;;
esac
done
