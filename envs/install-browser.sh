#!/usr/bin/env bash
# Headless Chromium for the report test (Debian's `chromium` package).  Best effort: when it
# cannot be installed, the browser test is skipped and says why; nothing else needs it.
set -uo pipefail
if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "[browser] no apt-get here: the report's browser test will be skipped"
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo -n"; fi
install() {
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        chromium fonts-liberation >/dev/null 2>&1
}
echo "[browser] installing Debian's chromium for the report test (once, about a minute)"
if ! install && ! { $sudo apt-get update -qq >/dev/null 2>&1 && install; }; then
    echo "[browser] could not install chromium: the report's browser test will be skipped"
fi
exit 0
