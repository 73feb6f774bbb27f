#!/usr/bin/env bash
# .ci/better-sqlite3.sh <node bin dir> [<headers node bin dir>]: builds the installed better-sqlite3 for that Node (from
# its headers, or those of the second Node of the same ABI; no download), once, into the cache beside that Node, and
# prints the path of the built better_sqlite3.node. The copy in node_modules is left as it is, so the Node it was built
# for keeps working; a test hands the printed file to better-sqlite3 as its `nativeBinding` ($BETTER_SQLITE3_BINDING,
# see core/test/support/sqlite-drivers.ts).
#   BETTER_SQLITE3_BINDING="$(.ci/better-sqlite3.sh "$(.ci/node.sh 24)" "$(.ci/node.sh 24.18.1)")"
# Why other headers: better-sqlite3 12 built against Node 24.19+ headers aborts the process when the garbage collector
# frees a Database or Statement outside a JS context ("Assertion failed: (env) != nullptr" in
# RemoveEnvironmentCleanupHook; nodejs/node#65446). Built against 24.18.1's, the same module runs clean on later 24.x.
set -euo pipefail
cd "$(dirname "$0")/.."

bin="${1:-}"
if [ -z "$bin" ] || [ ! -x "$bin/node" ]; then
  echo "usage: .ci/better-sqlite3.sh <node bin dir>   (for example: .ci/better-sqlite3.sh \"\$(.ci/node.sh 24)\")" >&2
  exit 2
fi
nodedir="$(cd "$bin/.." && pwd)"
headers="$nodedir"
if [ -n "${2:-}" ]; then
  headers="$(cd "$2/.." && pwd)"
  if [ "$("$2/node" -p process.versions.modules)" != "$("$bin/node" -p process.versions.modules)" ]; then
    echo "better-sqlite3.sh: $2/node has another ABI than $bin/node; its headers cannot build for it" >&2
    exit 1
  fi
fi
if [ ! -f "$headers/include/node/node.h" ]; then
  echo "better-sqlite3.sh: $headers has no include/node headers to build against" >&2
  exit 1
fi
src="node_modules/better-sqlite3"
if [ ! -f "$src/binding.gyp" ]; then
  echo "better-sqlite3.sh: better-sqlite3 is not installed here (npm install better-sqlite3)" >&2
  exit 1
fi
version="$(node -p 'require("./node_modules/better-sqlite3/package.json").version')"
abi="$("$bin/node" -p process.versions.modules)"
out="$nodedir/better-sqlite3-$version-headers-$("${2:-$bin}/node" -p process.versions.node)"
built="$out/build/Release/better_sqlite3.node"
if [ ! -f "$built" ]; then
  # node-gyp comes with npm; run by the target Node, it builds for that Node's ABI (node-v$abi).
  gyp="$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")/node_modules/node-gyp/bin/node-gyp.js"
  [ -f "$gyp" ] || gyp="$(npm prefix -g)/lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js"
  tmp="$(mktemp -d "$nodedir/.better-sqlite3.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  cp -R "$src/binding.gyp" "$src/deps" "$src/src" "$src/package.json" "$tmp/"
  start=$SECONDS
  if ! (cd "$tmp" && PATH="$bin:$PATH" node "$gyp" rebuild --release --nodedir="$headers" >"$tmp/build.log" 2>&1); then
    tail -20 "$tmp/build.log" >&2
    echo "better-sqlite3.sh: better-sqlite3 $version did not build for Node $("$bin/node" --version) (ABI $abi)" >&2
    exit 1
  fi
  echo "better-sqlite3.sh: built better-sqlite3 $version for Node $("$bin/node" --version) (headers of $(basename "$headers")) in $((SECONDS - start)) s" >&2
  # Only the module is kept (the build tree is about 27 MB).
  mkdir -p "$tmp/keep/build/Release"
  cp "$tmp/build/Release/better_sqlite3.node" "$tmp/keep/build/Release/"
  rm -rf "$out" && mv "$tmp/keep" "$out"
fi
echo "$built"
