#!/usr/bin/env bash
# Fails, naming them, when files of src/ are missing from docs/source-map.md.
# A file counts as listed when its name appears there, or its stem as
# `stem.*`, or inside a `{a,b}` group (`{h,cpp}` groups of extensions too).
# Run by the `docs.source-map` test; needs git and python3.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
git ls-files src | grep -v 'CMakeLists\.txt$' | /usr/bin/python3 -c '
import re, sys
text = open("docs/source-map.md").read()
names = set(re.findall(r"[\w./*-]+", text))
for group in re.findall(r"([\w/]*)\{([\w,]+)\}(\.?[\w*]*)", text):
    prefix, parts, suffix = group
    for part in parts.split(","):
        names.add((prefix + part + suffix).split("/")[-1])
        if suffix == "":
            names.add(prefix.split("/")[-1] + part)
listed = {n.split("/")[-1] for n in names}
missing = []
for path in sys.stdin.read().split():
    base = path.split("/")[-1]
    stem = base.rsplit(".", 1)[0]
    if base in listed or stem + ".*" in listed:
        continue
    missing.append(path)
if missing:
    print("docs/source-map.md does not list:", *missing, sep="\n  ")
    sys.exit(1)
print("docs/source-map.md lists every file of src/")
'
