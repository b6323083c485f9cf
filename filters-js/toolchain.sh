#!/usr/bin/env bash
# Installs the JavaScript filters' toolchain, componentize-js and jco from npm at the versions
# pinned in filters-js/package-lock.json, into a prefix under ~/.cache/edgegate/js-filters/,
# and prints the bin directory holding `componentize-js` and `jco`. Idempotent: a prefix
# whose install finished is reused, so a second run returns at once.
#
# Needs Node.js ^20.19 or 22.12+ and npm (the build tools' own requirement).
#
#   PATH="$(filters-js/toolchain.sh):$PATH"   # then componentize-js and jco are on the PATH
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

# The prefix is named after the lock file's hash, so that a change of the pins installs anew.
lock="$(sha256sum "$here/package-lock.json" | cut -c1-12)"
cache="${EDGEGATE_CACHE:-$HOME/.cache/edgegate}/js-filters"
prefix="$cache/$lock"

# Written last, so a prefix whose install was cut short is made again.
if [[ -f "$prefix/.installed" ]]; then
  echo "$prefix/node_modules/.bin"
  exit 0
fi

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "toolchain.sh: needs Node.js and npm on the PATH" >&2
  exit 1
fi
if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number);
  process.exit((a === 20 && b >= 19) || (a === 22 && b >= 12) || a > 22 ? 0 : 1)'; then
  echo "toolchain.sh: needs Node.js ^20.19 or 22.12+ (this is $(node --version))" >&2
  exit 1
fi

rm -rf "$prefix"
mkdir -p "$prefix"
cp "$here/package.json" "$here/package-lock.json" "$prefix/"
# npm's download cache is kept in the prefix and removed after the install, so that nothing
# grows outside it.
(cd "$prefix" && npm ci --no-audit --no-fund --loglevel=error --cache "$prefix/.npm-cache" >&2)
rm -rf "$prefix/.npm-cache"
touch "$prefix/.installed"
echo "$prefix/node_modules/.bin"
