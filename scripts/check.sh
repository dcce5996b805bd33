#!/usr/bin/env bash
# check.sh runs every test of toolhost, Go and extension, the way CI does on a
# fresh machine: it first installs what they need (Go modules; for the
# extension and the MCP client test, npm packages with npm ci, Node 24 for
# code-server, and Debian's chromium and libkrb5-dev; for the destination
# tests, Debian's openssh-server, whose sshd they run on loopback, and
# docker.io and busybox-static, for a docker destination), then vets, tests
# and plays the demos. Any failure fails the run. `make check`
# runs it; so does .ci/run.
#
#   TOOLHOST_SKIP_E2E=1 scripts/check.sh   # without code-server and Chromium
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PATH:/usr/local/go/bin"
t0=$SECONDS
section() { echo; echo "=== $* ($((SECONDS - t0))s)"; }

section "openssh-server (the destination tests run a real sshd), docker.io and busybox-static (the docker destination tests run a real dockerd), curl and git (the network allow-list tests drive them through the proxy)"
missing=()
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v curl >/dev/null || missing+=(curl)
command -v git >/dev/null || missing+=(git)
# The docker destination tests (internal/dockertest) need dockerd, and a
# static busybox for their image (Debian's busybox package is dynamic).
# This does not start dockerd: the fixture starts one of its own for the
# tests that need one, on its own socket, data-root and exec-root, unless a system
# dockerd answers on /var/run/docker.sock. It runs that dockerd with the
# vfs storage driver: overlay2 works on these machines (ext4), but not
# where the temporary directory is itself on overlayfs (a CI job inside a
# container) or lacks d_type, and vfs, which copies layers instead, works
# on any filesystem; the image is a static toolhost and busybox, so the
# copies are small (checked here: a container is up in about 0.5 s).
[ -x /usr/sbin/dockerd ] || missing+=(docker.io)
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed' || missing+=(busybox-static)
if [ ${#missing[@]} -eq 0 ]; then
  echo "already installed: $(/usr/sbin/sshd -V 2>&1 | head -n1 || true), $(curl --version | head -n1), $(git --version), $(/usr/sbin/dockerd --version), $(busybox | head -n1)"
else
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

section "go: $(go version)"
go mod download
go mod verify

section "go vet"
go vet ./...
GOOS=darwin go vet ./... # the Linux-only code stays behind build tags

section "Azurite (npm), the Azure Blob emulator"
# objstore/azblob's tests run a real Azurite (internal/azuritetest), pinned there and installed, not committed.
(cd internal/azuritetest && npm ci --no-audit --no-fund)

section "go test -race"
# The integration package runs a few hundred tests through the binary,
# two at a time on two cores; on a slow or busy machine it passes go
# test's default 10 minutes, which would end the run without a failure
# of its own.
go test -race -count=1 -timeout 30m ./...

section "benchmarks still build"
go test -run '^$' -bench '^$' ./... >/dev/null

section "demo"
go run . demo --log-level warn >/dev/null
go run . demo --mcp --log-level warn >/dev/null

section "MCP: the official TypeScript SDK's client drives the binary"
(cd integration/mcpnode && npm ci --no-audit --no-fund && npm test)

section "editor extension"
editor-extension/scripts/ci.sh

section "all passed"
