#!/usr/bin/env bash
# Fails, naming them, when files of src/ are missing from docs/source-map.md,
# or when a file of src/ofi includes a room listed after its own.
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

# src/ofi's rooms, in the order its table lists them (bottom up): a file
# may include only its own room, rooms listed before it, and core/.
/usr/bin/python3 - <<'PY'
import os, re, sys
text = open("docs/source-map.md").read()
section = text.split("## src/ofi:", 1)[1].split("\n## ", 1)[0]
rooms = re.findall(r"^\| `([a-z_]+)/` \|", section, re.M)
rank = {room: i for i, room in enumerate(rooms)}
if "ofi" not in rank or len(rooms) < 3:
    print("docs/source-map.md: no room table under 'src/ofi'")
    sys.exit(1)
upward = []
for dirpath, _, files in os.walk("src/ofi"):
    room = os.path.relpath(dirpath, "src/ofi").split("/")[0]
    room = "ofi" if room == "." else room
    if room not in rank:
        upward.append(f"{dirpath}: room not in docs/source-map.md's table")
        continue
    for name in files:
        path = os.path.join(dirpath, name)
        for line in open(path, errors="replace"):
            m = re.match(r'#include "ofi/([^"]+)"', line)
            if not m:
                continue
            parts = m.group(1).split("/")
            target = parts[0] if len(parts) > 1 else "ofi"
            if rank.get(target, -1) > rank[room]:
                upward.append(f"{path} ({room}/) includes ofi/{m.group(1)} ({target}/, listed after it)")
if upward:
    print("src/ofi rooms out of order:", *upward, sep="\n  ")
    sys.exit(1)
print("src/ofi: every room includes only the rooms listed before it")
PY
