#!/usr/bin/env bash
# Installs the real programs some end-to-end tests run, pinned, into target/test-clis/:
# - the claude CLI, for `agent_cli::agent_cli_real_claude_against_the_fake_model` (against the fake
#   model on 127.0.0.1: no test ever reaches the network);
# - the reference MCP memory server (@modelcontextprotocol/server-memory), for the sandbox tests
#   that start a server installed the way people install them (a script in node_modules, the
#   package's .bin link);
# - the reference MCP "everything" server (@modelcontextprotocol/server-everything): 2025-11-25
#   with Tasks (a task-required tool), for tests/mcp_tasks.rs;
# - FastMCP with the Tasks extension (fastmcp-tasks, PyPI: 2026-07-28 and SEP-2663) in a venv at
#   target/test-clis/pymcp, which runs tests/fixtures/tasks_server.py. It needs Python 3.12+.
# Without them, those tests say they are skipped. Needs Node 18+ and npm's registry (or npm's
# cache). Never fails the caller: it says why instead.
set -uo pipefail
cd "$(dirname "$0")/.."

CLAUDE_VERSION="2.1.197"    # the version the claude profile's flags were checked against
MEMORY_VERSION="2026.8.31"  # the memory server the sandbox tests run
EVERYTHING_VERSION="2026.8.31"  # the reference server with 2025-11-25 Tasks
FASTMCP_TASKS_VERSION="4.1.4"   # pins fastmcp-slim 4.1.4 and mcp 2.3.0
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
install "@modelcontextprotocol/server-everything@$EVERYTHING_VERSION" "the MCP everything server"

# A Python 3.12+ for FastMCP's Tasks extension (its task engine needs it).
install_fastmcp() {
  local venv="$DEST/pymcp" py=""
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -m pip show fastmcp-tasks 2>/dev/null \
      | grep -q "^Version: $FASTMCP_TASKS_VERSION$"; then
    echo "install-test-clis: fastmcp-tasks $FASTMCP_TASKS_VERSION already installed in $venv"
    return
  fi
  # pyenv's shims name versions that are not selected: look at its installs directly too.
  for c in python3.13 python3.12 python3 "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3; do
    if command -v "$c" >/dev/null 2>&1 \
        && "$c" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
      py="$c"
      break
    fi
  done
  if [ -z "$py" ]; then
    echo "install-test-clis: no Python 3.12+; the FastMCP Tasks tests will be skipped"
    return
  fi
  rm -rf "$venv"
  if "$py" -m venv "$venv" >>"$DEST/pip.log" 2>&1 \
      && timeout 300 "$venv/bin/python" -m pip install --quiet "fastmcp-tasks==$FASTMCP_TASKS_VERSION" \
        >>"$DEST/pip.log" 2>&1; then
    echo "install-test-clis: installed fastmcp-tasks $FASTMCP_TASKS_VERSION"
  else
    echo "install-test-clis: pip could not install fastmcp-tasks (see $DEST/pip.log); its tests will be skipped"
  fi
}
install_fastmcp
exit 0
