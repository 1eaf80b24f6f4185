#!/usr/bin/env bash
# Installs the pinned agent CLIs into .agents/ (npm packages in .agents/npm, aider in its own venv .agents/aider).
# A CLI that cannot be installed leaves a line in .agents/<name>.skip saying why; the suite then skips it.
set -uo pipefail
cd "$(dirname "$0")/../.."
DEST=.agents
PYTHON=${PYTHON:-python3}
CLAUDE_VERSION=2.1.197
CODEX_VERSION=0.171.0
OPENCODE_VERSION=1.18.33
AIDER_VERSION=0.86.2
mkdir -p "$DEST/npm"

install_npm() {  # name package version
  local name=$1 pkg=$2 version=$3 stamp="$DEST/$1.installed"
  rm -f "$DEST/$name.skip"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$version" ]; then return 0; fi
  if npm install --prefix "$DEST/npm" --no-audit --no-fund --loglevel=error "$pkg@$version" >"$DEST/$name.log" 2>&1; then
    echo "$version" >"$stamp"
  else
    echo "npm install $pkg@$version failed: $(tail -n 3 "$DEST/$name.log" | tr '\n' ' ')" >"$DEST/$name.skip"
  fi
}

install_aider() {
  local stamp="$DEST/aider.installed"
  rm -f "$DEST/aider.skip"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$AIDER_VERSION" ]; then return 0; fi
  if "$PYTHON" -m venv "$DEST/aider" >"$DEST/aider.log" 2>&1 \
    && "$DEST/aider/bin/pip" install --quiet "aider-chat==$AIDER_VERSION" >>"$DEST/aider.log" 2>&1; then
    echo "$AIDER_VERSION" >"$stamp"
  else
    echo "pip install aider-chat==$AIDER_VERSION failed: $(tail -n 3 "$DEST/aider.log" | tr '\n' ' ')" >"$DEST/aider.skip"
  fi
}

install_ripgrep() {  # opencode downloads ripgrep from outside the registries unless `rg` is on PATH
  if command -v rg >/dev/null 2>&1; then return 0; fi
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ripgrep) >"$DEST/ripgrep.log" 2>&1
  fi
  if ! command -v rg >/dev/null 2>&1; then
    echo "ripgrep (rg) is not installed and opencode would download it at run time" >"$DEST/opencode.skip"
  fi
}

start=$(date +%s)
install_npm claude @anthropic-ai/claude-code "$CLAUDE_VERSION"
install_npm codex @openai/codex "$CODEX_VERSION"
install_npm opencode opencode-ai "$OPENCODE_VERSION"
[ -f "$DEST/opencode.skip" ] || install_ripgrep
install_aider
for name in claude codex opencode aider; do
  if [ -f "$DEST/$name.skip" ]; then echo "skipped: $name: $(cat "$DEST/$name.skip")"; else echo "installed: $name $(cat "$DEST/$name.installed")"; fi
done
echo "agent CLIs install took $(( $(date +%s) - start )) s"
