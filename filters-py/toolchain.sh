#!/usr/bin/env bash
# Installs the Python filters' toolchain, componentize-py, from PyPI into a venv kept under
# ~/.cache/edgegate/python-filters/, and prints the venv's bin directory. Idempotent: a venv
# whose install finished is reused, so a second run returns at once.
#
# Needs Python 3.10 or newer to run componentize-py's command line (its wheel is native
# code; the Python a filter runs on is the CPython it bundles, not this one). The first of
# $EDGEGATE_PYTHON, python3.11 and python3 that is 3.10+ is used.
#
#   PATH="$(filters-py/toolchain.sh):$PATH"   # then componentize-py is on the PATH
set -euo pipefail

version=0.25.1
cache="${EDGEGATE_CACHE:-$HOME/.cache/edgegate}/python-filters"
venv="$cache/componentize-py-$version"

# Written last, so a venv whose install was cut short is made again.
if [[ -f "$venv/.installed" ]]; then
  echo "$venv/bin"
  exit 0
fi

python=""
for candidate in "${EDGEGATE_PYTHON:-}" python3.11 python3; do
  [[ -n "$candidate" ]] || continue
  if command -v "$candidate" >/dev/null &&
    "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    python="$candidate"
    break
  fi
done
if [[ -z "$python" ]]; then
  echo "toolchain.sh: needs Python 3.10 or newer (set EDGEGATE_PYTHON)" >&2
  exit 1
fi

rm -rf "$venv"
mkdir -p "$cache"
"$python" -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "componentize-py==$version" >&2
touch "$venv/.installed"
echo "$venv/bin"
