#!/usr/bin/env bash
# apidiff: the exported API of the module in the current directory (the
# working tree) against a base commit, with golang.org/x/exp/cmd/apidiff at
# the version .ci/apidiff/go.mod pins (built from the Go module proxy's
# source, checked by its go.sum). Every incompatible change fails the check
# unless CHANGELOG.md's Unreleased section names it (outside its Added
# subsection, as a whole name), as apidiff prints it without the leading
# "./" (e.g. `runtime.WithLimits`, `gateway.Options.Keys`).
#
# The base is $APIDIFF_BASE when set; else, on a branch other than main, the
# merge-base with main; else HEAD~1 (the previous commit of main). Without a
# base commit (a repository's first commit) there is nothing to compare and
# the check passes, saying so. Internal packages and commands are not API.
#
#   .ci/apidiff.sh            # from the module root, as make apidiff runs it
#   APIDIFF_BASE=v0.3.0 .ci/apidiff.sh
set -euo pipefail
tools="$(cd "$(dirname "$0")" && pwd)/apidiff"
repo="$(git rev-parse --show-toplevel)"
modroot="$(pwd)"
rel="${modroot#"$repo"}"; rel="${rel#/}"
module="$(go list -m)"

base="${APIDIFF_BASE:-}"
if [ -z "$base" ]; then
  branch="$(git rev-parse --abbrev-ref HEAD)"
  if [ "$branch" != main ] && git rev-parse -q --verify main^{commit} >/dev/null; then
    base="$(git merge-base HEAD main || true)"
    [ "$base" = "$(git rev-parse HEAD)" ] && base=""
  fi
  base="${base:-HEAD~1}"
fi
if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
  echo "apidiff: no base commit ($base): nothing to compare, the check passes"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
bin="$work/apidiff"
(cd "$tools" && GOFLAGS=-mod=readonly go build -o "$bin" golang.org/x/exp/cmd/apidiff)

mkdir "$work/old"
git archive "$base" | tar -x -C "$work/old"
if [ ! -f "$work/old/$rel/go.mod" ]; then
  echo "apidiff: $base has no module at ./$rel: nothing to compare, the check passes"
  exit 0
fi
# apidiff notes each internal package it skips on stderr: keep the rest.
quiet() { "$@" 2> >(grep -v '^Ignoring internal package' >&2); }
(cd "$work/old/$rel" && quiet "$bin" -m -w "$work/old.exp" "$module")
quiet "$bin" -m -w "$work/new.exp" "$module"
quiet "$bin" -m -incompatible "$work/old.exp" "$work/new.exp" >"$work/report"

# The names of the incompatible changes, outside internal packages and
# commands: "- ./gateway.Options.Keys: removed" is gateway.Options.Keys.
names="$(sed -n 's|^- \./\([^:]*\): .*|\1|p; s|^- \([^.][^:]*\): .*|\1|p' "$work/report" \
  | grep -Ev '^(cmd|examples)/|(^|/)internal(/|\.)' || true)"
short="$(git rev-parse --short "$base")"
if [ -z "$names" ]; then
  echo "apidiff: no incompatible change to the exported API since $base ($short)"
  exit 0
fi
unreleased=""
if [ -f CHANGELOG.md ]; then
  # The Unreleased section, less its Added subsection: an addition's entry
  # does not excuse a break of the same name.
  unreleased="$(awk '/^## \[Unreleased\]/{on=1; next} /^## /{on=0} on && /^### /{added=($2=="Added")} on && !added' CHANGELOG.md)"
fi
missing=0
while IFS= read -r name; do
  if grep -qFw -- "$name" <<<"$unreleased"; then
    echo "apidiff: incompatible, in CHANGELOG.md: $name"
  else
    echo "apidiff: incompatible, not in CHANGELOG.md's Unreleased section: $name ($(grep -F -- "$name: " "$work/report" | head -1 | sed 's/^- [^:]*: //'))"
    missing=1
  fi
done <<<"$names"
if [ "$missing" -ne 0 ]; then
  echo "apidiff: incompatible changes since $base ($short) must be named in CHANGELOG.md under ## [Unreleased]" >&2
  exit 1
fi
