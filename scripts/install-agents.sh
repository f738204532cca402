#!/usr/bin/env bash
# install-agents.sh: install the pinned real agent CLIs that the real-agents
# test tier (internal/realagents) drives, into a cache dir outside the source
# tree. Idempotent: a second run checks the installed versions and returns.
#
#   scripts/install-agents.sh            # install (or verify) all three
#   SESSIOND_AGENTS_DIR=/opt/agents scripts/install-agents.sh
#
# Prints, on stdout, one line per agent that tests and CI can eval:
#   SESSIOND_CLAUDE_BIN=<path>
#   SESSIOND_OPENCODE_BIN=<path>
#   SESSIOND_CODEX_BIN=<path>
#   SESSIOND_QWEN_BIN=<path>
# Progress and timings go to stderr. A pinned version missing from the
# registry is an error: this script never takes another version.
set -euo pipefail

CLAUDE_PKG=@anthropic-ai/claude-code
CLAUDE_VERSION=2.1.328
OPENCODE_PKG=opencode-ai
OPENCODE_VERSION=1.18.33
# Codex's npm package carries its native binary (vendor/<target>/bin/codex)
# and a node wrapper as .bin/codex.
CODEX_PKG=@openai/codex
CODEX_VERSION=0.169.0
# Qwen Code: a node program (its bundle, cli.js) as .bin/qwen.
QWEN_PKG=@qwen-code/qwen-code
QWEN_VERSION=0.24.4

DIR="${SESSIOND_AGENTS_DIR:-$HOME/.cache/sessiond-agents}"

log() { printf 'install-agents: %s\n' "$*" >&2; }
die() {
	printf '\ninstall-agents: ERROR: %s\n\n' "$*" >&2
	exit 1
}

command -v npm >/dev/null || die "npm not found: install Node.js (20 or newer) and npm"
command -v node >/dev/null || die "node not found: install Node.js (20 or newer)"

# installed_version PREFIX PKG prints the version of PKG installed under PREFIX.
installed_version() {
	local pj="$1/node_modules/$2/package.json"
	[ -f "$pj" ] || return 0
	node -e 'process.stdout.write(require(process.argv[1]).version || "")' "$pj" 2>/dev/null || true
}

# install PKG VERSION BIN NAME: installs PKG@VERSION into $DIR/NAME-VERSION
# unless it is already there, and prints the binary's path.
install() {
	local pkg=$1 version=$2 bin=$3 name=$4
	local prefix="$DIR/$name-$version"
	local binpath="$prefix/node_modules/.bin/$bin"
	if [ -f "$prefix/.complete" ] && [ -x "$binpath" ] && [ "$(installed_version "$prefix" "$pkg")" = "$version" ]; then
		log "$pkg@$version already installed in $prefix"
		printf '%s\n' "$binpath"
		return
	fi
	local found
	found=$(npm view "$pkg@$version" version 2>/dev/null || true)
	if [ "$found" != "$version" ]; then
		die "pinned $pkg@$version does not exist on the npm registry ($(npm config get registry)). \
Not installing another version: update the pin in $0 deliberately."
	fi
	log "installing $pkg@$version into $prefix"
	local start=$SECONDS
	local tmp
	mkdir -p "$DIR"
	tmp=$(mktemp -d "$DIR/.tmp-$name-XXXXXX")
	# A private package.json keeps npm from walking up to a parent project.
	printf '{"name":"sessiond-agent-%s","private":true}\n' "$name" >"$tmp/package.json"
	if ! npm install --prefix "$tmp" --no-audit --no-fund --no-save --loglevel=error \
		"$pkg@$version" >&2; then
		rm -rf "$tmp"
		die "npm install $pkg@$version failed"
	fi
	local got
	got=$(installed_version "$tmp" "$pkg")
	if [ "$got" != "$version" ]; then
		rm -rf "$tmp"
		die "npm installed $pkg@$got, not the pinned $version"
	fi
	[ -x "$tmp/node_modules/.bin/$bin" ] || {
		rm -rf "$tmp"
		die "$pkg@$version installed no $bin binary"
	}
	touch "$tmp/.complete"
	rm -rf "$prefix"
	mv "$tmp" "$prefix"
	log "installed $pkg@$version in $((SECONDS - start))s"
	printf '%s\n' "$binpath"
}

start=$SECONDS
claude=$(install "$CLAUDE_PKG" "$CLAUDE_VERSION" claude claude-code)
opencode=$(install "$OPENCODE_PKG" "$OPENCODE_VERSION" opencode opencode)
codex=$(install "$CODEX_PKG" "$CODEX_VERSION" codex codex)
qwen=$(install "$QWEN_PKG" "$QWEN_VERSION" qwen qwen-code)
log "done in $((SECONDS - start))s"
printf 'SESSIOND_CLAUDE_BIN=%s\n' "$claude"
printf 'SESSIOND_OPENCODE_BIN=%s\n' "$opencode"
printf 'SESSIOND_CODEX_BIN=%s\n' "$codex"
printf 'SESSIOND_QWEN_BIN=%s\n' "$qwen"
