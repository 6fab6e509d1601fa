#!/usr/bin/env bash
# Installs the real programs some end-to-end tests run, pinned, into target/test-clis/:
# - the claude CLI, for `agent_cli::agent_cli_real_claude_against_the_fake_model` (against the fake
#   model on 127.0.0.1: no test ever reaches the network);
# - the reference MCP memory server (@modelcontextprotocol/server-memory), for the sandbox tests
#   that start a server installed the way people install them (a script in node_modules, the
#   package's .bin link).
# Without them, those tests say they are skipped. Needs Node 18+ and npm's registry (or npm's
# cache). Never fails the caller: it says why instead.
set -uo pipefail
cd "$(dirname "$0")/.."

CLAUDE_VERSION="2.1.197"    # the version the claude profile's flags were checked against
MEMORY_VERSION="2026.8.31"  # the memory server the sandbox tests run
DEST="target/test-clis"

if ! command -v npm >/dev/null 2>&1; then
  echo "install-test-clis: npm is not installed; the real-claude and real-server tests will be skipped"
  exit 0
fi
mkdir -p "$DEST"

# install PACKAGE@VERSION WHAT: installs unless that version is there already.
install() {
  local spec="$1" what="$2" name="${1%@*}" version="${1##*@}"
  local manifest="$DEST/node_modules/$name/package.json"
  if [ -f "$manifest" ] && grep -q "\"version\": \"$version\"" "$manifest"; then
    echo "install-test-clis: $what $version already installed in $DEST"
    return
  fi
  if timeout 300 npm install --no-audit --no-fund --loglevel=error --prefix "$DEST" "$spec" \
    >/dev/null 2>>"$DEST/npm.log"; then
    echo "install-test-clis: installed $what $version"
  else
    echo "install-test-clis: npm could not install $what (see $DEST/npm.log); its tests will be skipped"
  fi
}

install "@anthropic-ai/claude-code@$CLAUDE_VERSION" "claude"
install "@modelcontextprotocol/server-memory@$MEMORY_VERSION" "the MCP memory server"
exit 0
