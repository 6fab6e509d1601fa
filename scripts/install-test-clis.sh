#!/usr/bin/env bash
# Installs the real claude CLI, pinned, into target/test-clis/ so that the end-to-end test
# `agent_cli::agent_cli_real_claude_against_the_fake_model` runs it (against the fake model on
# 127.0.0.1: no test ever reaches the network). Without it, that test says it is skipped.
# Needs Node 18+ and npm's registry (or npm's cache). Never fails the caller: it says why instead.
set -uo pipefail
cd "$(dirname "$0")/.."

CLAUDE_VERSION="2.1.197"   # the version the claude profile's flags were checked against
DEST="target/test-clis"

if ! command -v npm >/dev/null 2>&1; then
  echo "install-test-clis: npm is not installed; the real-claude test will be skipped"
  exit 0
fi
mkdir -p "$DEST"
if [ -x "$DEST/node_modules/.bin/claude" ] && "$DEST/node_modules/.bin/claude" --version 2>/dev/null | grep -q "^$CLAUDE_VERSION"; then
  echo "install-test-clis: claude $CLAUDE_VERSION already installed in $DEST"
  exit 0
fi
if timeout 300 npm install --no-audit --no-fund --loglevel=error --prefix "$DEST" \
  "@anthropic-ai/claude-code@$CLAUDE_VERSION" >/dev/null 2>"$DEST/npm.log"; then
  echo "install-test-clis: installed claude $("$DEST/node_modules/.bin/claude" --version 2>/dev/null)"
else
  echo "install-test-clis: npm could not install claude (see $DEST/npm.log); the real-claude test will be skipped"
fi
exit 0
