#!/usr/bin/python3
"""weft-info --check end to end: the plugin found as NCCL finds it, over tcp,
shm and softverbs (with softcuda's GPU), every JSON report validated against
docs/node-check.schema.json, and each finding that a broken node must show:
no plugin, an NCCL too old, NCCL_NET_PLUGIN unset, a bad parameter, a provider
that does not exist, GPU memory that no device can register, a registration
that fails. Limits are set per case (the check reads them) so the verdicts do
not depend on this machine's.

usage: node_check_test.py WEFT_INFO PLUGIN SCHEMA FAKE_NCCL_DIR SOFTVERBS_LIB SOFTCUDA_DIR
"""
import difflib
import json
import os
import re
import resource
import subprocess
import sys
import tempfile

import jsonschema

weft_info, plugin, schema_path, fake_nccl_dir, softverbs_lib, softcuda_dir = sys.argv[1:7]
plugin_dir = os.path.dirname(os.path.realpath(plugin))
schema = json.load(open(schema_path))
failures = []


def limits(memlock_soft, nofile_soft, raise_hard=False):
    def apply():
        if raise_hard:
            resource.setrlimit(resource.RLIMIT_MEMLOCK, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            resource.setrlimit(resource.RLIMIT_NOFILE, (1048576, 1048576))
            return
        hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (memlock_soft, hard))
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile_soft, hard))
    return apply


def run(name, env_extra, args=(), unset=(), preexec=None, text=False):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WEFT_", "NCCL_", "FI_", "SOFTVERBS_", "SOFTCUDA_")) and k not in unset}
    env["LD_LIBRARY_PATH"] = plugin_dir + ":" + fake_nccl_dir
    env["NCCL_NET_PLUGIN"] = "weft"
    for key in unset:
        env.pop(key, None)
    env.update(env_extra)
    cmd = [weft_info, "--check"] + ([] if text else ["--json"]) + list(args)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120,
                          preexec_fn=preexec or limits(64 * 1024, 4096))
    if text:
        return proc, None
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        failures.append(f"{name}: not JSON ({e}); exit {proc.returncode}; stderr: {proc.stderr[-2000:]}")
        return proc, None
    try:
        jsonschema.validate(report, schema)
    except jsonschema.ValidationError as e:
        failures.append(f"{name}: does not match the schema: {e.message} at {list(e.absolute_path)}")
    if report.get("exit_status") != proc.returncode:
        failures.append(f"{name}: exit status {proc.returncode}, report says {report.get('exit_status')}")
    severities = {f["severity"] for f in report.get("findings", [])}
    expected = 2 if "failure" in severities else 1 if "warning" in severities else 0
    if proc.returncode != expected:
        failures.append(f"{name}: exit status {proc.returncode} with findings {severities}")
    return proc, report


def expect(name, condition, what, report=None):
    if not condition:
        detail = ""
        if report is not None:
            detail = "; findings: " + json.dumps(report.get("findings"), indent=1)
        failures.append(f"{name}: {what}{detail}")


def finding(report, severity, topic, text):
    return any(f["severity"] == severity and f["topic"] == topic and text in f["text"]
               for f in report["findings"])


tcp = {"WEFT_OFI_PROVIDER": "tcp", "WEFT_OFI_DOMAIN": "lo"}
verbs = {"WEFT_TRANSPORT": "verbs", "WEFT_IBVERBS_LIB": softverbs_lib}

# tcp: the plugin as NCCL 2.28 loads it (ncclNetPlugin_v11), one device.
proc, r = run("tcp", tcp, ["--no-gpu"])
if r:
    expect("tcp", r["plugin"]["path"] == os.path.realpath(plugin), f"loaded {r['plugin']['path']}")
    expect("tcp", r["plugin"]["name"] == "weft" and r["plugin"]["abi_version"] == 11,
           f"plugin {r['plugin']['name']} v{r['plugin']['abi_version']}")
    expect("tcp", r["nccl"]["version"] == "2.28.9", f"NCCL {r['nccl']}")
    expect("tcp", [d["name"] for d in r["devices"]] == ["lo"] and r["devices"][0]["ptr_support"] == "HOST",
           f"devices {r['devices']}")
    expect("tcp", r["plugin"]["init_result"] == "ncclSuccess", r["plugin"]["init_result"])
    # tcp's registrations pin nothing: the memlock limit is a note there.
    expect("tcp", finding(r, "note", "limits", "locked memory is limited to 64 KiB"), "memlock note", r)
    expect("tcp", finding(r, "warning", "limits", "open files are limited to 4096"), "nofile warning", r)
    expect("tcp", any(p["name"] == "WEFT_OFI_PROVIDER" and p["value"] == "tcp" and p["source"] == "env"
                      for p in r["parameters"]), "WEFT_OFI_PROVIDER not reported as set")
    expect("tcp", {"name": "NCCL_NET_PLUGIN", "value": "weft"} in r["environment"], "NCCL_NET_PLUGIN")
    expect("tcp", any(lib["role"] == "libfabric" and lib["version"] for lib in r["libraries"]),
           f"libfabric's version: {r['libraries']}")
    # What weft chose and why: the provider named, on every domain but the
    # one WEFT_OFI_DOMAIN leaves out.
    cands = r["plugin"]["candidates"]
    # tcp registers nothing real: its region count, stated or not, is no warning.
    expect("tcp", len(r["limits"]["memory_regions"]) == len(r["devices"]) and
           not finding(r, "warning", "limits", "memory regions"), f"limits {r['limits']}", r)
    expect("tcp", {"kind": "transport", "name": "ofi", "where": "libfabric", "used": True,
                   "reason": "WEFT_OFI_PROVIDER names a libfabric provider"} in cands, f"candidates {cands}")
    expect("tcp", any(c["kind"] == "provider" and c["name"].startswith("tcp") and c["used"] and
                      c["reason"].startswith("WEFT_OFI_PROVIDER=tcp") for c in cands), f"candidates {cands}")

proc, r = run("tcp, one domain", dict(tcp, WEFT_OFI_DOMAIN="lo"), ["--no-gpu"])
if r:
    cands = [c for c in r["plugin"]["candidates"] if c["kind"] == "provider" and c["used"]]
    expect("tcp, one domain", len(cands) == 1 and cands[0]["where"] == "lo" and
           "; not on eth0: domain excluded by WEFT_OFI_DOMAIN=lo" in cands[0]["reason"]
           or not os.path.exists("/sys/class/net/eth0"), f"candidates {r['plugin']['candidates']}")

# auto on a node with software providers only: nothing used, each provider
# named with the variable that would use it, and the node not usable.
proc, r = run("auto, software only", {}, ["--no-gpu"])
if r:
    cands = r["plugin"]["candidates"]
    providers = [c for c in cands if c["kind"] == "provider"]
    expect("auto, software only", proc.returncode == 2 and providers and
           all(not c["used"] and c["reason"].startswith("a software provider, which auto never takes")
               for c in providers) and
           any(c["name"].startswith("tcp") and c["reason"].endswith("WEFT_OFI_PROVIDER=tcp uses it")
               for c in providers) and
           any(c["kind"] == "transport" and c["name"] == "verbs" and not c["used"] for c in cands),
           f"exit {proc.returncode}, candidates {cands}")
    # The libraries it loaded are listed although its init failed.
    expect("auto, software only", any(lib["role"] == "libfabric" and lib["version"] for lib in r["libraries"]),
           f"libraries {r['libraries']}")

# A node with nothing to complain about: limits raised, where this process
# may raise them (root with CAP_SYS_RESOURCE; not in every container).
try:
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    resource.setrlimit(resource.RLIMIT_NOFILE, (1048576, 1048576))
    can_raise = True
except (ValueError, OSError):
    can_raise = False
    print("note: cannot raise memlock and nofile here; the 'ready' case is not run")
if can_raise:
    proc, r = run("ready", tcp, ["--no-gpu"], preexec=limits(0, 0, raise_hard=True))
    if r:
        expect("ready", r["verdict"] == "ready" and proc.returncode == 0, f"verdict {r['verdict']}", r)

# The same as text: the verdict first and last.
proc, _ = run("text", tcp, ["--no-gpu"], text=True)
expect("text", proc.stdout.startswith("weft node check: warnings\n") and
       proc.stdout.rstrip().endswith("warnings (exit status 1)") and proc.returncode == 1,
       f"exit {proc.returncode}, output:\n{proc.stdout}")

# NCCL 2.30 loads v12, which has rail and plane ids.
proc, r = run("nccl-2.30", dict(tcp, FAKE_NCCL_VERSION="23000"), ["--no-gpu"])
if r:
    expect("nccl-2.30", r["plugin"]["abi_version"] == 12 and r["devices"] and r["devices"][0]["rail_id"] >= 0,
           f"v{r['plugin']['abi_version']}, devices {r['devices']}")

# NCCL 2.12 looks for no version weft exports.
proc, r = run("nccl-2.12", dict(tcp, FAKE_NCCL_VERSION="21200"), ["--no-gpu"])
if r:
    expect("nccl-2.12", finding(r, "failure", "nccl", "NCCL 2.12.0 looks for ncclNet v5 or older"), "", r)

# NCCL_NET_PLUGIN unset: NCCL would not load weft; the check says so.
proc, r = run("no NCCL_NET_PLUGIN", tcp, ["--no-gpu"], unset=("NCCL_NET_PLUGIN",))
if r:
    expect("no NCCL_NET_PLUGIN", finding(r, "warning", "nccl", "NCCL_NET_PLUGIN is not set"), "", r)

# No plugin where asked.
proc, r = run("missing plugin", tcp, ["--no-gpu", "--plugin", "/nonexistent/libnccl-net-weft.so"])
if r:
    expect("missing plugin", r["plugin"]["path"] is None and not r["devices"] and
           finding(r, "failure", "plugin", "/nonexistent/libnccl-net-weft.so"), "", r)

# NCCL told to load no plugin.
proc, r = run("NCCL_NET_PLUGIN=none", dict(tcp, NCCL_NET_PLUGIN="none"), ["--no-gpu"])
if r:
    expect("NCCL_NET_PLUGIN=none", proc.returncode == 2 and
           finding(r, "failure", "nccl", "NCCL_NET_PLUGIN=none: NCCL loads no external plugin"), "", r)

# A parameter out of range.
proc, r = run("bad parameter", dict(tcp, WEFT_OFI_CQ_SIZE="1"), ["--no-gpu"])
if r:
    expect("bad parameter", finding(r, "failure", "variables", "WEFT_OFI_CQ_SIZE"), "", r)

# A provider that does not exist: no device, and the plugin's reason.
proc, r = run("no provider", {"WEFT_OFI_PROVIDER": "nosuchprovider"}, ["--no-gpu"])
if r:
    expect("no provider", proc.returncode == 2 and not r["devices"] and
           any(f["severity"] == "failure" and f["topic"] in ("plugin", "devices") for f in r["findings"]),
           "no failure", r)

# shm: another software provider.
proc, r = run("shm", {"WEFT_OFI_PROVIDER": "shm"}, ["--no-gpu"])
if r:
    expect("shm", len(r["devices"]) == 1 and finding(r, "note", "limits", "locked memory"), "", r)

# softverbs with softcuda's GPU: a device buffer registered through the
# plugin by dma-buf; the memlock limit matters on an RDMA device.
gpu_env = dict(verbs, LD_LIBRARY_PATH=plugin_dir + ":" + fake_nccl_dir + ":" + softcuda_dir)
with tempfile.TemporaryDirectory() as registry:
    gpu_env["SOFTVERBS_DIR"] = registry
    proc, r = run("softverbs+gpu", gpu_env)
    if r:
        expect("softverbs+gpu", r["devices"] and "CUDA" in r["devices"][0]["ptr_support"],
               f"devices {r['devices']}")
        expect("softverbs+gpu", r["gpus"]["driver"] and len(r["gpus"]["devices"]) >= 1 and
               all(g["registered"] and g["registration"] == "ok" for g in r["gpus"]["devices"]),
               f"gpus {r['gpus']}", r)
        expect("softverbs+gpu", finding(r, "warning", "limits", "locked memory is limited to 64 KiB"),
               "memlock warning", r)
        expect("softverbs+gpu", any(lib["role"] == "libcuda" and lib["path"].startswith(softcuda_dir)
                                    for lib in r["libraries"]), f"libraries {r['libraries']}")

    # No dma-buf on the device: no weft device takes GPU memory.
    proc, r = run("softverbs, no dma-buf", dict(gpu_env, SOFTVERBS_DMABUF="0"))
    if r:
        expect("softverbs, no dma-buf", finding(r, "warning", "gpu", "no weft device registers GPU memory") and
               not r["gpus"]["devices"][0]["registered"], "", r)

    # The device refuses the registration (its MR limit).
    proc, r = run("softverbs, MR limit", dict(gpu_env, SOFTVERBS_MAX_MR="1"))
    if r:
        expect("softverbs, MR limit", proc.returncode == 2 and
               finding(r, "failure", "gpu", "device buffer could not be registered") and
               not r["gpus"]["devices"][0]["registered"], "", r)

    # rdma-core without fork support (a kernel before 5.13): a warning on
    # an RDMA device; a kernel that needs none: silence.
    proc, r = run("softverbs, fork disabled", dict(gpu_env, SOFTVERBS_FORK="disabled"), ["--no-gpu"])
    if r:
        expect("softverbs, fork disabled", r["limits"]["fork_safety"] == "disabled" and
               finding(r, "warning", "limits", "fork() is not safe with registered memory"), "", r)
    # A device that allows few memory regions: a warning with the figure.
    proc, r = run("softverbs, few regions", dict(gpu_env, SOFTVERBS_MAX_MR="4096"), ["--no-gpu"])
    if r:
        expect("softverbs, few regions", r["limits"]["memory_regions"][0]["limit"] == 4096 and
               finding(r, "warning", "limits", "softverbs0 allows 4096 memory regions") and
               finding(r, "warning", "limits", "enough for about 256 peers per process"), "", r)
    proc, r = run("softverbs, fork unneeded", gpu_env, ["--no-gpu"])
    if r:
        expect("softverbs, regions", r["limits"]["memory_regions"] == [
            {"device": "softverbs0", "limit": 1 << 20,
             "source": "ibv_query_device max_mr, shared by every process on the device"}] and
            not finding(r, "warning", "limits", "memory regions"), f"limits {r['limits']}", r)
        expect("softverbs, candidates", r["plugin"]["candidates"] == [
            {"kind": "transport", "name": "verbs", "where": "rdma-core", "used": True,
             "reason": "WEFT_TRANSPORT=verbs"}], f"candidates {r['plugin']['candidates']}")
    if r:
        expect("softverbs, fork unneeded", r["limits"]["fork_safety"] == "unneeded" and
               not finding(r, "warning", "limits", "fork()"), "", r)

    # --no-gpu skips the GPU entirely.
    proc, r = run("softverbs, --no-gpu", gpu_env, ["--no-gpu"])
    if r:
        expect("softverbs, --no-gpu", not r["gpus"]["devices"] and r["gpus"]["driver"] is None,
               f"gpus {r['gpus']}")

def golden_text(text, replace, name):
    """Compares a text report with fixtures/node-check/NAME once what belongs
    to this machine is masked: paths, addresses, ports and GID indexes (from
    this machine's interfaces), libfabric and the
    system's rdma-core libraries, weft's version, hard limits, the kernel's
    fork, hugepage and THP settings.
    WEFT_UPDATE_GOLDEN=1 rewrites the file."""
    for old, new in list(replace.items()) + [(os.path.dirname(plugin_dir.rstrip("/")), "<build>")]:
        text = text.replace(old, new)
    # The libfabric build (1.17 from Debian, or 2.6) and the system's
    # rdma-core libraries it loads are the machine's, not the report's.
    rules = [(r"\b\d{1,3}(\.\d{1,3}){3}(:\d+)?", "<addr>"), (r"<addr> \(\w+\)", "<addr> (<if>)"),
             (r"(?m)^  (libfabric|libefa) .*\n", ""), (r"(?m)^  libibverbs /usr/.*\n", ""),
             (r"(?m)^  weft-info  .*$", "  weft-info  <version>"), (r"GID index \d+", "GID index <n>"),
             (r"hard (\d+|unlimited)", "hard <hard>"), (r"(?m)^  fork +\S+", "  fork       <kernel>"),
             (r"(?m)^  hugepages .*$", "  hugepages  <kernel>")]
    for pattern, repl in rules:
        text = re.sub(pattern, repl, text)
    path = os.path.join(os.path.dirname(os.path.realpath(__file__)), "fixtures", "node-check", name)
    if os.environ.get("WEFT_UPDATE_GOLDEN") == "1":
        with open(path, "w") as f:
            f.write(text)
        return
    want = open(path).read()
    expect(name, text == want, "differs from the golden copy:\n" + "".join(
        difflib.unified_diff(want.splitlines(True), text.splitlines(True), "golden", "now")))


def fake_tree(sysfs, shape, ids=None):
    """PCI functions {bus id: (parent path below devices/, NUMA node)} under
    a fake sysfs root, with {bus id: (class, vendor, device)} where given;
    returns their paths."""
    paths = {}
    for bus_id, (parent, node) in shape.items():
        path = f"{sysfs}/devices/{parent}/{bus_id}"
        os.makedirs(path)
        files = {"numa_node": node}
        if ids and bus_id in ids:
            files.update(zip(("class", "vendor", "device"), ids[bus_id]))
        for name, value in files.items():
            with open(f"{path}/{name}", "w") as f:
                f.write(f"{value}\n")
        os.makedirs(sysfs + "/bus/pci/devices", exist_ok=True)
        os.symlink(path, f"{sysfs}/bus/pci/devices/{bus_id}")
        paths[bus_id] = path
    return paths


# A recorded node shape: two host bridges (NUMA nodes 0 and 1), each with a
# GPU and a NIC under one root port, the NICs listed in the other order.
# Each GPU must pair with the NIC beside it, and register there.
with tempfile.TemporaryDirectory() as root, tempfile.TemporaryDirectory() as registry:
    sysfs = root + "/sys"
    shape = {
        "0000:17:00.0": ("pci0000:00/0000:00:01.0", 0),  # GPU 0
        "0000:18:00.0": ("pci0000:00/0000:00:01.0", 0),  # its NIC, listed second
        "0000:81:00.0": ("pci0000:80/0000:80:01.0", 1),  # GPU 1
        "0000:82:00.0": ("pci0000:80/0000:80:01.0", 1),  # its NIC, listed first
    }
    paths = fake_tree(sysfs, shape)
    shape_env = dict(gpu_env, SOFTVERBS_DIR=registry, SOFTVERBS_DEVICES="2", SOFTCUDA_DEVICES="2",
                     SOFTVERBS_PCI_PATHS=paths["0000:82:00.0"] + "," + paths["0000:18:00.0"],
                     SOFTCUDA_PCI_BUS_IDS="0000:17:00.0,0000:81:00.0")
    # The report as an operator reads it, against a golden copy.
    proc, _ = run("node shape, text", dict(shape_env, SOFTVERBS_NODE_ID="golden"),
                  ["--sysfs-root", sysfs], text=True)
    golden_text(proc.stdout, {sysfs: "<sysfs>", registry: "<registry>"}, "two-socket-softverbs.txt")
    proc, r = run("node shape", shape_env, ["--sysfs-root", sysfs])
    if r:
        nic_of = {d["pci_path"]: i for i, d in enumerate(r["devices"])}
        want = {0: nic_of.get(paths["0000:18:00.0"]), 1: nic_of.get(paths["0000:82:00.0"])}
        expect("node shape", len(r["devices"]) == 2 and None not in want.values(),
               f"devices {[d['pci_path'] for d in r['devices']]}")
        gpus = r["gpus"]["devices"]
        expect("node shape", len(gpus) == 2, f"gpus {gpus}")
        for g in gpus:
            expect("node shape", g["nearest_net_device"] == want[g["ordinal"]] and
                   g["nearest_relation"] == "under the same PCI bridge" and
                   g["numa_node"] == g["ordinal"] and g["net_device"] == want[g["ordinal"]] and
                   g["registered"], f"GPU {g}")
    # Without the tree (this machine's /sys knows no such GPUs): no pairing,
    # and the check says NCCL cannot pair them either.
    proc, r = run("node shape, no sysfs", shape_env)
    if r:
        expect("node shape, no sysfs", all(g["nearest_net_device"] == -1 for g in r["gpus"]["devices"]) and
               finding(r, "note", "gpu", "no place in this node's PCI tree"), "", r)

# A VM's flat tree: each GPU and NIC on a host bridge of its own. The check
# warns that NCCL cannot pair them, unless NCCL_TOPO_FILE gives the layout.
with tempfile.TemporaryDirectory() as root, tempfile.TemporaryDirectory() as registry:
    sysfs = root + "/sys"
    paths = fake_tree(sysfs, {bus_id: (f"pci{bus_id[:4]}:00", -1) for bus_id in
                              ("0001:00:00.0", "0002:00:00.0", "0101:00:00.0", "0102:00:00.0")})
    flat_env = dict(gpu_env, SOFTVERBS_DIR=registry, SOFTVERBS_DEVICES="2", SOFTCUDA_DEVICES="2",
                    SOFTVERBS_PCI_PATHS=paths["0101:00:00.0"] + "," + paths["0102:00:00.0"],
                    SOFTCUDA_PCI_BUS_IDS="0001:00:00.0,0002:00:00.0")
    proc, r = run("flat tree", flat_env, ["--sysfs-root", sysfs])
    if r:
        expect("flat tree", finding(r, "warning", "gpu", "no GPU shares a host bridge with a weft NIC") and
               all(g["nearest_relation"].startswith("different host bridges") for g in r["gpus"]["devices"]), "", r)
    proc, r = run("flat tree, NCCL_TOPO_FILE", dict(flat_env, NCCL_TOPO_FILE="/etc/nccl-topo.xml"),
                  ["--sysfs-root", sysfs])
    if r:
        expect("flat tree, NCCL_TOPO_FILE",
               finding(r, "note", "gpu", "NCCL_TOPO_FILE=/etc/nccl-topo.xml gives NCCL the layout") and
               not finding(r, "warning", "gpu", "no GPU shares a host bridge"), "", r)

# An NDv4-like VM (DMI, eight A100 and eight ConnectX-6 VFs, each on a host
# bridge of its own): weft's init points NCCL_TOPO_FILE at the table's
# layout itself, and the check says so instead of warning.
with tempfile.TemporaryDirectory() as root, tempfile.TemporaryDirectory() as registry:
    sysfs = root + "/sys"
    gpus = [f"{i:04x}:00:00.0" for i in range(1, 9)]
    nics = [f"{0x100 + i:04x}:00:00.0" for i in range(1, 9)]
    ids = {b: ("0x030200", "0x10de", "0x20b2") for b in gpus}
    ids.update({b: ("0x020700", "0x15b3", "0x101c") for b in nics})
    paths = fake_tree(sysfs, {b: (f"pci{b[:4]}:00", i % 8 // 2) for i, b in enumerate(gpus + nics)}, ids)
    os.makedirs(sysfs + "/class/dmi/id")
    with open(sysfs + "/class/dmi/id/sys_vendor", "w") as f:
        f.write("Microsoft Corporation\n")
    ndv4_env = dict(gpu_env, SOFTVERBS_DIR=registry, SOFTVERBS_DEVICES="8", SOFTCUDA_DEVICES="8",
                    SOFTVERBS_PCI_PATHS=",".join(paths[b] for b in nics),
                    SOFTCUDA_PCI_BUS_IDS=",".join(gpus), WEFT_SYSFS_ROOT=sysfs, WEFT_DEBUG="INFO")
    proc, r = run("ndv4 VM", ndv4_env, ["--sysfs-root", sysfs])
    if r:
        expect("ndv4 VM", finding(r, "note", "gpu", "weft's init points NCCL_TOPO_FILE at the instance table") and
               not finding(r, "warning", "gpu", "no GPU shares a host bridge") and
               any("the table azure-ndv4 layout of 8 GPUs and 8 NICs" in line["text"] for line in r["plugin"]["log"]),
               "", r)

# Bad usage.
proc = subprocess.run([weft_info, "--check", "--bogus"], capture_output=True, text=True)
expect("usage", proc.returncode == 2 and "accepted: --json, --plugin PATH, --no-gpu, --sysfs-root DIR" in proc.stderr,
       f"exit {proc.returncode}, stderr {proc.stderr}")

if failures:
    print("FAILED:\n" + "\n".join(failures))
    sys.exit(1)
print("node check: all cases passed")
