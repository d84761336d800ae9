#!/usr/bin/env bash
# Install specbench into .venv (make install): with uv when it can be had (a fresh clone's
# install in seconds rather than a minute), else with pip. uv does not read pip's configuration,
# so the find-links, extra indexes and constraints pip is configured with are handed to it, and
# it picks the best version across all indexes as pip does. Usage: install.sh VENV TORCH EXTRAS
# [TORCH_INDEX]. SPECBENCH_INSTALLER=pip skips uv.
set -eu
VENV=$1 TORCH=$2 EXTRAS=$3 TORCH_INDEX=${4:-}
PYTHON=${PYTHON:-python3}
PY=$VENV/bin/python

step() { printf 'install: %s\n' "$*"; }
start=$(date +%s)

uv_bin() {
    command -v uv 2>/dev/null && return 0
    [ -x "$VENV/.uv/bin/uv" ] && { echo "$VENV/.uv/bin/uv"; return 0; }
    "$PYTHON" -m pip install -q --target "$VENV/.uv/lib" uv >/dev/null 2>&1 || return 1
    mkdir -p "$VENV/.uv/bin" && ln -sf "../lib/bin/uv" "$VENV/.uv/bin/uv" && echo "$VENV/.uv/bin/uv"
}

PIP_CONFIG=""  # `pip config list`, read once below (a third of a second each time)
pip_option() {  # the values pip is configured with for one option, space-separated
    printf '%s\n' "$PIP_CONFIG" | sed -n "s/^[a-z:]*\.$1='\(.*\)'\$/\1/p" | tr '\n' ' '
}

UV=""
if [ "${SPECBENCH_INSTALLER:-uv}" != pip ]; then
    step "getting uv"
    UV=$(uv_bin) || UV=""
fi
# uv installs into a venv without pip of its own (ensurepip: 3 s of a fresh clone's install);
# pip installs with the venv's pip.
if [ -n "$UV" ]; then
    test -x "$PY" || { step "creating $VENV"; "$PYTHON" -m venv --without-pip "$VENV"; }
else
    test -x "$VENV/bin/pip" || { step "creating $VENV"; "$PYTHON" -m venv "$VENV"; }
fi
if [ -n "$UV" ]; then
    args=(--python "$PY" --index-strategy unsafe-best-match -q)
    PIP_CONFIG=$("$PYTHON" -m pip config list 2>/dev/null || true)
    for link in ${PIP_FIND_LINKS:-} $(pip_option find-links); do args+=(--find-links "$link"); done
    for index in $(pip_option extra-index-url); do args+=(--extra-index-url "$index"); done
    for file in $(pip_option constraint); do [ -f "$file" ] && args+=(--constraint "$file"); done
    step "torch ($TORCH) and specbench[$EXTRAS] with uv"
    [ -z "$TORCH_INDEX" ] || "$UV" pip install "${args[@]}" "$TORCH" --index-url "$TORCH_INDEX"
    "$UV" pip install "${args[@]}" "$TORCH" -e ".[$EXTRAS]"
else
    step "torch ($TORCH) and specbench[$EXTRAS] with pip"
    "$PY" -m pip install -q --upgrade pip
    "$PY" -m pip install -q "$TORCH" ${TORCH_INDEX:+--index-url "$TORCH_INDEX"}
    "$PY" -m pip install -q -e ".[$EXTRAS]"
fi
step "done in $(( $(date +%s) - start )) s"
