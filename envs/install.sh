#!/usr/bin/env bash
# Create (or update) the project's virtual environment: envs/install.sh [VENV]
# Dependencies are reinstalled only when pyproject.toml changes; the package itself is always
# re-linked (editable) to this checkout.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-${PABENCH_VENV:-$HOME/.cache/pabench/venv}}"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
    echo "[install] creating $venv"
    "$python" -m venv "$venv"
fi
stamp="$venv/.pabench-deps"
want="$(sha256sum "$here/pyproject.toml" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "[install] installing dependencies (first run: several minutes, PyTorch is large)"
    "$venv/bin/pip" install -q --upgrade pip
    # The CUDA build runs on CPU too; torchvision must match torch.
    "$venv/bin/pip" install -q "torch==2.14.1" "torchvision==0.29.1"
    # slurm: the SLURM executor plugin (small, pure Python), so its pre-flight tests run too;
    # robustbench: the paper's RobustBench architectures (the rehearsal and its tests).
    "$venv/bin/pip" install -q -e "$here[test,slurm,robustbench]"
    echo "$want" > "$stamp"
fi
"$venv/bin/pip" install -q --no-deps -e "$here"

# Fashion-MNIST offline: Debian's dataset-fashion-mnist puts the IDX files where
# pabench.datasets.fashion_mnist looks first.  Best effort: without it the data is downloaded,
# so nothing here may fail the install.
fmnist=/usr/share/datasets/fashion-mnist
if [ ! -d "$fmnist" ] && command -v apt-get >/dev/null 2>&1; then
    sudo="" root=1
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo="sudo -n"
        else
            root=0
        fi
    fi
    # $sudo unquoted on purpose: empty, or the two words "sudo -n".
    apt_get() { $sudo env DEBIAN_FRONTEND=noninteractive apt-get -y -q "$@" >/dev/null 2>&1; }
    if [ "$root" -eq 0 ]; then
        echo "[install] no root: skipping dataset-fashion-mnist (Fashion-MNIST downloads on use)"
    # Package lists may be empty or stale (fresh containers): on failure update once and retry.
    elif apt_get install dataset-fashion-mnist \
            || { apt_get update && apt_get install dataset-fashion-mnist; }; then
        echo "[install] installed dataset-fashion-mnist ($fmnist)"
    else
        echo "[install] could not install dataset-fashion-mnist (Fashion-MNIST downloads on use)"
    fi
fi
echo "[install] ready: $venv"
