#!/usr/bin/env bash
# The extension's whole CI, on a fresh machine (root, Debian, Go, Node 20,
# npm): installs what it needs, then runs every check and exits non-zero if
# any failed. The project's .ci/run calls it.
#
#   editor-extension/scripts/ci.sh            # everything
#   TOOLHOST_SKIP_E2E=1 scripts/ci.sh          # without code-server/chromium
#
#  1. go test ./internal/tsgen   protocol.ts and PROTOCOL.md's reference are
#                                what `go generate ./protocol` makes
#  2. tsc --noEmit               strict typecheck of the extension and tests
#  3. node --test out/test/      unit tests + protocol tests against the real
#                                Go binary in header and ndjson framing
#  4. npm run package            the .vsix, with the server at bin/toolhost
#  5. node --test e2e/           code-server + headless Chromium: recipe,
#                                Tools view, progress, live output, cancel,
#                                sh in a terminal (keys, resize, attach, close),
#                                a port opened (notification, browser, view),
#                                a destination (picker, group), crash restarts,
#                                a command's snapshot (Changes, diff, undo),
#                                toolhost.networkAllow (refused host, "confined"),
#                                a window reload mid-command (toolhost.persist)
set -uo pipefail

EXT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPO="$(cd "$EXT_DIR/.." && pwd)"
cd "$EXT_DIR"

failed=()
step() {
  local name="$1"; shift
  local t0=$SECONDS
  echo "=== $name"
  if "$@"; then
    echo "=== $name: ok ($((SECONDS - t0))s)"
  else
    echo "=== $name: FAILED ($((SECONDS - t0))s)"
    failed+=("$name")
  fi
}

e2e=1
[[ "${TOOLHOST_SKIP_E2E:-}" == 1 ]] && e2e=0

if [[ $e2e == 1 ]]; then
  step install scripts/install-e2e.sh
else
  step install scripts/install-e2e.sh --no-e2e
fi
if ((${#failed[@]})); then
  echo "ci: install failed"; exit 1
fi

bin_dir="$(mktemp -d)"
trap 'rm -rf "$bin_dir"' EXIT

step "tsgen drift test" bash -c "cd '$REPO' && go test ./internal/tsgen"
step typecheck npm run --silent typecheck
step "build server" bash -c "cd '$REPO' && go build -o '$bin_dir/toolhost' ."
step "node tests" env TOOLHOST_BIN="$bin_dir/toolhost" npm run --silent test
if [[ $e2e == 1 ]]; then
  step package npm run --silent package
  step "e2e (code-server)" node --test e2e/
fi

if ((${#failed[@]})); then
  echo "ci: FAILED: ${failed[*]}"
  exit 1
fi
echo "ci: all passed"
