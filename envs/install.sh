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
    "$venv/bin/pip" install -q -e "$here[test]"
    echo "$want" > "$stamp"
fi
"$venv/bin/pip" install -q --no-deps -e "$here"
echo "[install] ready: $venv"
