#!/usr/bin/env bash
# install-agents.sh: install the pinned real agent CLIs that the real-agents
# test tier (internal/realagents) drives, into a cache dir outside the source
# tree. Idempotent: a second run checks the installed versions and returns.
#
#   scripts/install-agents.sh            # install (or verify) every agent
#   scripts/install-agents.sh --latest   # the newest release of each instead
#   SESSIOND_AGENTS_DIR=/opt/agents scripts/install-agents.sh
#
# Prints, on stdout, one line per agent that tests and CI can eval:
#   SESSIOND_CLAUDE_BIN=<path>
#   SESSIOND_OPENCODE_BIN=<path>
#   SESSIOND_CODEX_BIN=<path>
#   SESSIOND_PI_BIN=<path>
#   SESSIOND_COPILOT_BIN=<path>
#   SESSIOND_GEMINI_BIN=<path>
#   SESSIOND_QWEN_BIN=<path>
# Progress and timings go to stderr. A pinned version missing from the
# registry is an error: this script never takes another version.
# --latest asks the registry for each package's newest release (its
# "latest" tag) and installs that instead of the pin, beside the pinned
# ones (each version has its own folder), to run the real tier against
# what users get today.
set -euo pipefail

CLAUDE_PKG=@anthropic-ai/claude-code
CLAUDE_VERSION=2.1.332
OPENCODE_PKG=opencode-ai
OPENCODE_VERSION=1.18.33
# Codex's npm package carries its native binary (vendor/<target>/bin/codex)
# and a node wrapper as .bin/codex.
CODEX_PKG=@openai/codex
CODEX_VERSION=0.171.0
# Pi's npm package is plain JavaScript: .bin/pi is its cli.js, run by node.
PI_PKG=@mariozechner/pi-coding-agent
PI_VERSION=0.73.1
# Copilot's npm package is a node loader (.bin/copilot) that spawns the
# native binary of @github/copilot-<platform>; at its first run the binary
# unpacks its JavaScript (~235 MB) into $COPILOT_PKG_CACHE_HOME/pkg. The
# tests point that at <prefix>/pkg-cache, unpacked here once.
COPILOT_PKG=@github/copilot
COPILOT_VERSION=1.0.102
# Gemini CLI's npm package is a node bundle; .bin/gemini is its script.
GEMINI_PKG=@google/gemini-cli
GEMINI_VERSION=0.61.0
# Qwen Code: a node program (its bundle, cli.js) as .bin/qwen.
QWEN_PKG=@qwen-code/qwen-code
QWEN_VERSION=0.24.4

DIR="${SESSIOND_AGENTS_DIR:-$HOME/.cache/sessiond-agents}"

usage() {
	cat <<EOF
Usage: $0 [--latest] [--help]

Installs the real agent CLIs (Claude Code, OpenCode, Codex, Pi, GitHub
Copilot, Gemini CLI, Qwen Code) that the real-agents test tier (internal/realagents) drives, each into its own
versioned folder under $DIR
(\$SESSIOND_AGENTS_DIR), and prints one SESSIOND_<AGENT>_BIN=<path>
line per agent on stdout; progress goes to stderr. A version already
installed is checked and kept: a second run only prints the lines.

  (no option)  the versions pinned in this script, which the tier is
               known to pass with: $CLAUDE_PKG $CLAUDE_VERSION,
               $OPENCODE_PKG $OPENCODE_VERSION, $CODEX_PKG $CODEX_VERSION,
               $PI_PKG $PI_VERSION, $COPILOT_PKG $COPILOT_VERSION,
               $GEMINI_PKG $GEMINI_VERSION, $QWEN_PKG $QWEN_VERSION
  --latest     the newest release of each instead (the npm registry's
               "latest" tag, asked now), which may be newer than the
               pins; the pinned installs are left as they are
  -h, --help   this text

To run the real tier against them:
  eval "\$($0 [--latest] | sed 's/^/export /')"
  go test -count=1 ./internal/realagents
EOF
}

latest=""
kind=pinned
for arg in "$@"; do
	case "$arg" in
	--latest) latest=1 kind=newest ;;
	-h | --help)
		usage
		exit 0
		;;
	*)
		usage >&2
		printf '\ninstall-agents: ERROR: unknown argument: %s\n' "$arg" >&2
		exit 2
		;;
	esac
done

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
		die "$kind $pkg@$version does not exist on the npm registry ($(npm config get registry)). \
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
		die "npm installed $pkg@$got, not the $kind $version"
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

# newest PKG prints PKG's newest release: the version the registry's
# "latest" tag names.
newest() {
	local v
	v=$(npm view "$1@latest" version 2>/dev/null || true)
	[ -n "$v" ] || die "could not ask the npm registry ($(npm config get registry)) for the newest $1"
	log "newest $1: $v"
	printf '%s\n' "$v"
}

if [ -n "$latest" ]; then
	CLAUDE_VERSION=$(newest "$CLAUDE_PKG")
	OPENCODE_VERSION=$(newest "$OPENCODE_PKG")
	CODEX_VERSION=$(newest "$CODEX_PKG")
	PI_VERSION=$(newest "$PI_PKG")
	COPILOT_VERSION=$(newest "$COPILOT_PKG")
	GEMINI_VERSION=$(newest "$GEMINI_PKG")
	QWEN_VERSION=$(newest "$QWEN_PKG")
fi

start=$SECONDS
claude=$(install "$CLAUDE_PKG" "$CLAUDE_VERSION" claude claude-code)
opencode=$(install "$OPENCODE_PKG" "$OPENCODE_VERSION" opencode opencode)
codex=$(install "$CODEX_PKG" "$CODEX_VERSION" codex codex)
pi=$(install "$PI_PKG" "$PI_VERSION" pi pi)
copilot=$(install "$COPILOT_PKG" "$COPILOT_VERSION" copilot copilot)
copilot_cache="$(dirname "$(dirname "$(dirname "$copilot")")")/pkg-cache"
if ! ls "$copilot_cache"/pkg/*/"$COPILOT_VERSION"/.extraction-complete >/dev/null 2>&1; then
	log "unpacking $COPILOT_PKG@$COPILOT_VERSION into $copilot_cache"
	COPILOT_PKG_CACHE_HOME="$copilot_cache" COPILOT_AUTO_UPDATE=false COPILOT_OFFLINE=true \
		"$copilot" --version >&2 || die "$copilot --version failed"
fi
gemini=$(install "$GEMINI_PKG" "$GEMINI_VERSION" gemini gemini-cli)
qwen=$(install "$QWEN_PKG" "$QWEN_VERSION" qwen qwen-code)
log "done in $((SECONDS - start))s"
printf 'SESSIOND_CLAUDE_BIN=%s\n' "$claude"
printf 'SESSIOND_OPENCODE_BIN=%s\n' "$opencode"
printf 'SESSIOND_CODEX_BIN=%s\n' "$codex"
printf 'SESSIOND_PI_BIN=%s\n' "$pi"
printf 'SESSIOND_COPILOT_BIN=%s\n' "$copilot"
printf 'SESSIOND_GEMINI_BIN=%s\n' "$gemini"
printf 'SESSIOND_QWEN_BIN=%s\n' "$qwen"
