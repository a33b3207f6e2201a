#!/usr/bin/env bash
# Regenerates the configuration reference from weft's parameter table:
#   docs/configuration.md  = weft-info --params-markdown
#   README.md              = its parameter table, between the BEGIN/END markers
#
# usage: scripts/gen-docs.sh [--check] [--weft-info PATH]
#   --check      compare only: print the diff and exit 1 when a file is stale
#   --weft-info  the weft-info binary (default: build/src/tools/info/weft-info,
#                built with the default preset if missing)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
check=0
weft_info=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --check) check=1; shift ;;
    --weft-info) weft_info=${2:?--weft-info needs a path}; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gen-docs.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

if [[ -z "$weft_info" ]]; then
  weft_info="$root/build/src/tools/info/weft-info"
  if [[ ! -x "$weft_info" ]]; then
    echo "gen-docs.sh: building weft-info" >&2
    [[ -f "$root/build/build.ninja" ]] || (cd "$root" && cmake --preset default >&2)
    (cd "$root" && cmake --build build --target weft-info >&2)
  fi
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The markdown holds only the table's defaults, so the environment cannot change it.
"$weft_info" --params-markdown > "$tmp/configuration.md"

# README.md keeps a copy of the table (the lines starting with '|').
begin='<!-- BEGIN generated parameter table: scripts/gen-docs.sh -->'
end='<!-- END generated parameter table -->'
grep '^|' "$tmp/configuration.md" > "$tmp/table.md"
if ! grep -qxF "$begin" "$root/README.md" || ! grep -qxF "$end" "$root/README.md"; then
  echo "gen-docs.sh: README.md lacks the markers:" >&2
  printf '  %s\n  %s\n' "$begin" "$end" >&2
  exit 1
fi
awk -v begin="$begin" -v end="$end" -v table="$tmp/table.md" '
  $0 == begin { print; while ((getline line < table) > 0) print line; skip = 1; next }
  $0 == end { skip = 0 }
  !skip { print }
' "$root/README.md" > "$tmp/README.md"

stale=0
for file in docs/configuration.md README.md; do
  generated="$tmp/$(basename "$file")"
  if [[ $check -eq 1 ]]; then
    if ! diff -u --label "$file (committed)" --label "$file (generated)" \
        "$root/$file" "$generated" 2>/dev/null; then
      [[ -f "$root/$file" ]] || echo "gen-docs.sh: $file is missing"
      stale=1
    fi
  elif ! cmp -s "$root/$file" "$generated"; then
    cp "$generated" "$root/$file"
    echo "gen-docs.sh: updated $file"
  fi
done

if [[ $stale -eq 1 ]]; then
  echo
  echo "The configuration reference is out of date with include/weft/param_table.h."
  echo "Fix: scripts/gen-docs.sh   (then commit docs/configuration.md and README.md)"
  exit 1
fi
[[ $check -eq 1 ]] && echo "gen-docs.sh: docs/configuration.md and README.md are up to date"
exit 0
