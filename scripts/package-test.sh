#!/usr/bin/env bash
# The packages where users install them: builds the .deb and the .rpm from
# a build folder (cpack), runs lintian on the .deb (every tag must be fixed
# or overridden with its reason in packaging/debian/lintian-overrides),
# then makes a fresh Debian bookworm root from the host's package archive
# (mmdebstrap), installs the .deb there with apt so its declared
# dependencies are resolved, and inside that root runs the node check and a
# two-rank weft-perf transfer through the installed plugin, found by NCCL's
# rule (libnccl-net-weft.so on the library path). Last, libfabric is removed
# from the root behind dpkg's back: the node check must then fail, naming
# the missing library. Needs root (mmdebstrap's root mode).
# usage: scripts/package-test.sh [BUILD_DIR]   (default build)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=$(realpath "${1:-build}")
schema=$PWD/docs/node-check.schema.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

step() { echo "==> package test: $*"; }
fail() {
  echo "package test FAILED: $*" >&2
  exit 1
}

step "cpack -G DEB and -G RPM in $build"
rm -rf "$build/packages"
(cd "$build" && cpack -G DEB >/dev/null && cpack -G RPM >/dev/null) || fail "cpack"
deb=$(ls "$build"/packages/libnccl-net-weft_*_amd64.deb)
rpm=$(ls "$build"/packages/libnccl-net-weft-*.x86_64.rpm)
# Lists read whole first: with pipefail, grep -q leaving at its first match
# can end rpm with SIGPIPE, which failed a run (2026-12-02).
rpm_files=$(rpm -qpl "$rpm")
rpm_requires=$(rpm -qp --requires "$rpm")
grep -qx /usr/lib/libnccl-net-weft.so <<<"$rpm_files" || fail "$rpm lacks /usr/lib/libnccl-net-weft.so"
grep -q '^libfabric >= 1.17' <<<"$rpm_requires" || fail "$rpm does not require libfabric"

step "lintian $(basename "$deb")"
lintian --tag-display-limit 0 --fail-on error,warning "$deb" 2>&1 | grep -v 'running with root privileges' ||
  true
lintian --fail-on error,warning "$deb" >/dev/null 2>&1 || fail "lintian reports errors or warnings"

# The host's archive (CI: Debian's registry, nothing else), as apt sees it.
sources=$work/sources.list
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  if [[ -f $f ]]; then grep -E '^deb ' "$f" >>"$sources" || true; fi
done
for f in /etc/apt/sources.list.d/*.sources; do
  [[ -f $f ]] || continue
  # deb822 -> one-line entries (Types deb only).
  awk 'BEGIN { RS=""; FS="\n" }
       { t=u=s=c=""
         for (i = 1; i <= NF; i++) {
           if ($i ~ /^Types:/) t=$i; if ($i ~ /^URIs:/) u=$i
           if ($i ~ /^Suites:/) s=$i; if ($i ~ /^Components:/) c=$i }
         if (t !~ /deb( |$)/) next
         sub(/^URIs: */, "", u); sub(/^Suites: */, "", s); sub(/^Components: */, "", c)
         n = split(s, suites, " ")
         for (k = 1; k <= n; k++) print "deb " u " " suites[k] " " c }' "$f" >>"$sources"
done
[[ -s $sources ]] || fail "no Debian archive in /etc/apt"

step "fresh bookworm root (mmdebstrap), the .deb installed with apt, checks inside"
cp "$deb" "$work/weft.deb"
cat >"$work/inside.sh" <<'EOF'
#!/bin/sh
# Runs in the fresh root: the node check and a transfer through the
# installed plugin, then the same check with libfabric gone.
export NCCL_NET_PLUGIN=weft WEFT_OFI_PROVIDER=tcp WEFT_OFI_DOMAIN=lo
weft-info --check --no-gpu --json >/out/check.json 2>/out/check.err
echo $? >/out/check.status
weft-perf --local --plugin libnccl-net-weft.so --test latency,bw --max-bytes 1M --iters 100 \
  --quiet >/out/perf.txt 2>&1
echo $? >/out/perf.status
dpkg --force-depends -r libfabric1 >/out/remove.txt 2>&1
weft-info --check --no-gpu --json >/out/broken.json 2>/out/broken.err
echo $? >/out/broken.status
EOF
chmod +x "$work/inside.sh"
mkdir -p "$work/out"
make_root() {
  rm -rf "$work/root"
  # shellcheck disable=SC2016  # "$1" is mmdebstrap's: the root, in each hook
  mmdebstrap --variant=apt --quiet \
    --customize-hook="copy-in $work/weft.deb $work/inside.sh /tmp" \
    --customize-hook='chroot "$1" apt-get install -y -q /tmp/weft.deb' \
    --customize-hook='mkdir -p "$1/out" && chroot "$1" /tmp/inside.sh' \
    --customize-hook="sync-out /out $work/out" \
    bookworm "$work/root" "$sources" >"$work/mmdebstrap.log" 2>&1
}
# A second try when the first fails: it downloads a hundred packages, and
# one dropped connection should not fail CI.
if ! make_root; then
  tail -30 "$work/mmdebstrap.log"
  echo "==> package test: mmdebstrap failed; trying once more"
  make_root || { tail -30 "$work/mmdebstrap.log"; fail "mmdebstrap"; }
fi

step "judging what ran inside"
python3 - "$work/out" "$schema" <<'EOF' || fail "checks inside the root"
import json, sys
import jsonschema
out, schema_path = sys.argv[1], sys.argv[2]
schema = json.load(open(schema_path))
problems = []

def read(name):
    return open(f"{out}/{name}").read()

check = json.loads(read("check.json"))
jsonschema.validate(check, schema)
status = int(read("check.status"))
if status > 1 or check["exit_status"] != status:
    problems.append(f"node check: exit {status}, findings {check['findings']}")
if check["plugin"]["path"] != "/usr/lib/libnccl-net-weft.so":
    problems.append(f"node check loaded {check['plugin']['path']}")
if [d["name"] for d in check["devices"]] != ["lo"]:
    problems.append(f"node check devices {check['devices']}")

perf = read("perf.txt")
if int(read("perf.status")) != 0 or "received bytes verified: all" not in perf:
    problems.append("weft-perf through the installed plugin:\n" + perf[-2000:])

broken = json.loads(read("broken.json"))
jsonschema.validate(broken, schema)
if int(read("broken.status")) != 2 or not any(
        f["severity"] == "failure" and f["topic"] == "plugin" and "libfabric.so.1" in f["text"]
        for f in broken["findings"]):
    problems.append(f"without libfabric the check should fail naming it: {broken['findings']}")

if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"inside the root: node check {check['verdict']}, {check['plugin']['path']} "
      f"(ncclNetPlugin_v{check['plugin']['abi_version']}); weft-perf verified; without "
      f"libfabric1: {broken['verdict']}")
EOF
step "passed"
