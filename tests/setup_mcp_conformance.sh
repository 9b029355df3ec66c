#!/bin/sh
# Set up the MCP conformance suite for tests/test_mcp_conformance.py, from the npm registry,
# in a cache folder: the npm package @modelcontextprotocol/conformance with the dependency
# tree tests/mcp_conformance/package-lock.json pins (`npm ci`), and a Node.js it runs on.
# The suite needs Node 22 or later (it imports fs.globSync); Debian's node is 20, so when
# the node on PATH is older, npm's node-<platform>-<arch> package of NODE_VERSION is
# installed beside it. Prints two lines: the node to run, the suite's entry point.
# Exits 1 (saying why) when npm is missing or an install fails.
set -eu
NODE_VERSION=22.23.5
HERE=$(cd "$(dirname "$0")" && pwd)
LOCK="$HERE/mcp_conformance"
CACHE="${REACTLAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/reactlab}"
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    echo "setup_mcp_conformance: npm (and node) not installed" >&2
    exit 1
fi
mkdir -p "$CACHE"

# install DIR ARGS...: run npm in a fresh temporary folder, then move it to DIR (another
# run that got there first wins; a failed install leaves nothing behind)
install() {
    dir=$1
    shift
    tmp=$(mktemp -d "$CACHE/.setup.XXXXXX")
    if ! (cd "$tmp" && "$@" >&2); then
        rm -rf "$tmp"
        echo "setup_mcp_conformance: '$*' failed" >&2
        exit 1
    fi
    mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp"
}

KEY=$(cat "$LOCK/package.json" "$LOCK/package-lock.json" | sha256sum | cut -c1-12)
SUITE="$CACHE/mcp-conformance-$KEY"
ENTRY="$SUITE/node_modules/@modelcontextprotocol/conformance/dist/index.js"
if [ ! -f "$ENTRY" ]; then
    install "$SUITE" sh -c "cp '$LOCK/package.json' '$LOCK/package-lock.json' . && \
        npm ci --no-audit --no-fund --loglevel=error"
fi

NODE=$(command -v node)
if [ "$("$NODE" -p 'process.versions.node.split(".")[0]')" -lt 22 ]; then
    PLATFORM=$("$NODE" -p 'process.platform + "-" + process.arch')
    NODE_DIR="$CACHE/node-$NODE_VERSION-$PLATFORM"
    NODE="$NODE_DIR/node_modules/node-$PLATFORM/bin/node"
    if [ ! -x "$NODE" ]; then
        install "$NODE_DIR" npm install --no-audit --no-fund --loglevel=error \
            "node-$PLATFORM@$NODE_VERSION"
    fi
fi
"$NODE" "$ENTRY" --version >/dev/null
echo "$NODE"
echo "$ENTRY"
