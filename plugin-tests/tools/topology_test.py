#!/usr/bin/python3
"""weft-info --topo end to end: recorded node shapes as fake sysfs roots,
weft's devices from the plugin on softverbs placed at those PCI addresses,
the XML compared with golden files and checked against the grammar NCCL's
topology parser reads (src/graph/xml.cc: elements, attributes, limits).
The checker is itself tested: each broken file below must fail it.

usage: topology_test.py WEFT_INFO PLUGIN FAKE_NCCL_DIR SOFTVERBS_LIB FIXTURES [--update]
"""
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

weft_info, plugin, fake_nccl_dir, softverbs_lib, fixtures = sys.argv[1:6]
update = "--update" in sys.argv[6:]
plugin_dir = os.path.dirname(os.path.realpath(plugin))
failures = []

# ---------------------------------------------------------------- grammar ---
CHILDREN = {None: {"system"}, "system": {"cpu"}, "cpu": {"pci", "nic"},
            "pci": {"pci", "gpu", "nic", "pcilink"}, "gpu": {"nvlink", "c2c"}, "nic": {"net"},
            "net": set(), "pcilink": set(), "nvlink": set(), "c2c": set()}
PCI_SPEEDS = {"", "2.5 GT/s", "5 GT/s", "8 GT/s", "16 GT/s", "32 GT/s", "2.5 GT/s PCIe",
              "5.0 GT/s PCIe", "8.0 GT/s PCIe", "16.0 GT/s PCIe", "32.0 GT/s PCIe", "64.0 GT/s PCIe"}
TOKEN = re.compile(r'<!--.*?-->|<(/?)([A-Za-z]+)((?: [A-Za-z_]+="[^"<>]*")*)(/?)>', re.S)
ATTR = re.compile(r' ([A-Za-z_]+)="([^"]*)"')
INT = re.compile(r"^-?[0-9]+$")


def nccl_topology_errors(text):
    """What NCCL's parser would refuse or misread, as a list of messages."""
    errors = []
    stack, seen_busids, seen_names, seen_devs, nodes = [], set(), set(), set(), 0
    pos = 0
    for m in TOKEN.finditer(text):
        gap = text[pos:m.start()]
        if gap.strip(" \n\r"):
            errors.append(f"text or characters NCCL does not skip before offset {m.start()}: {gap!r}")
        pos = m.end()
        if m.group(0).startswith("<!--"):
            continue
        closing, tag, attr_text, single = m.group(1), m.group(2), m.group(3), m.group(4)
        if closing:
            if not stack or stack[-1] != tag:
                errors.append(f"</{tag}> closes {stack[-1] if stack else 'nothing'}")
            else:
                stack.pop()
            continue
        nodes += 1
        parent = stack[-1] if stack else None
        if tag not in CHILDREN.get(parent, set()):
            errors.append(f"<{tag}> is not read inside <{parent}>")
        attrs = ATTR.findall(attr_text)
        keys = [k for k, _ in attrs]
        a = dict(attrs)
        if len(attrs) > 16:
            errors.append(f"<{tag}> has {len(attrs)} attributes (NCCL reads 16)")
        if len(set(keys)) != len(keys):
            errors.append(f"<{tag}> repeats an attribute")
        for k, v in attrs:
            if len(v) > 254:
                errors.append(f"<{tag} {k}> is longer than 254 characters")
        if tag == "system" and a.get("version") != "1":
            errors.append("<system> version must be 1")
        if tag == "cpu":
            if not INT.match(a.get("numaid", "")):
                errors.append("<cpu> without an integer numaid")
            if a.get("arch") not in ("x86_64", "arm64", "ppc64"):
                errors.append(f"<cpu> arch {a.get('arch')!r} is not one NCCL knows")
            if a.get("arch") == "x86_64" and (a.get("vendor") not in ("GenuineIntel", "AuthenticAMD")
                                              or not INT.match(a.get("familyid", ""))
                                              or not INT.match(a.get("modelid", ""))):
                errors.append("<cpu> on x86_64 needs vendor, familyid and modelid")
            if "affinity" in a and not re.match(r"^[0-9a-f]+(,[0-9a-f]+)*$", a["affinity"]):
                errors.append(f"<cpu> affinity {a['affinity']!r} is not a cpumap")
        if tag == "pci":
            busid = a.get("busid", "")
            if not re.match(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", busid):
                errors.append(f"<pci> busid {busid!r} is not dddd:bb:dd.f")
            if busid in seen_busids:
                errors.append(f"<pci> busid {busid} appears twice")
            seen_busids.add(busid)
            if not re.match(r"^0x[0-9a-f]{6}$", a.get("class", "")):
                errors.append(f"<pci {busid}> class {a.get('class')!r} is not 0xcccccc")
            if a.get("link_speed") not in PCI_SPEEDS:
                errors.append(f"<pci {busid}> link_speed {a.get('link_speed')!r} is not one NCCL rates")
            if not INT.match(a.get("link_width", "")):
                errors.append(f"<pci {busid}> link_width is not an integer")
        if tag == "net":
            name = a.get("name", "")
            if not name or name in seen_names:
                errors.append(f"<net> name {name!r} missing or repeated")
            seen_names.add(name)
            if not INT.match(a.get("dev", "")) or a.get("dev") in seen_devs:
                errors.append(f"<net {name}> dev {a.get('dev')!r} missing, not an integer or repeated")
            seen_devs.add(a.get("dev"))
        if not single:
            stack.append(tag)
    if text[pos:].strip(" \n\r"):
        errors.append(f"trailing text {text[pos:]!r}")
    if stack:
        errors.append(f"unclosed {stack}")
    if nodes > 256:
        errors.append(f"{nodes} elements (NCCL reads 256)")
    try:
        ET.fromstring(text)
    except ET.ParseError as e:
        errors.append(f"not well-formed XML: {e}")
    return errors


# ------------------------------------------------------------- node trees ---
def make_tree(root, functions, numa_cpumaps, dmi):
    """functions: (path below devices/, class, vendor, device, speed, width, numa)."""
    sysfs = root + "/sys"
    for path, cls, vendor, device, speed, width, numa in functions:
        full = f"{sysfs}/devices/{path}"
        os.makedirs(full, exist_ok=True)
        files = {"class": cls, "vendor": vendor, "device": device, "subsystem_vendor": vendor,
                 "subsystem_device": "0x0001", "numa_node": str(numa)}
        if speed:
            files["max_link_speed"] = speed
            files["max_link_width"] = str(width)
        for name, value in files.items():
            with open(f"{full}/{name}", "w") as f:
                f.write(value + "\n")
        os.makedirs(sysfs + "/bus/pci/devices", exist_ok=True)
        os.symlink(full, f"{sysfs}/bus/pci/devices/{path.rsplit('/', 1)[1]}")
    for node, cpumap in enumerate(numa_cpumaps):
        os.makedirs(f"{sysfs}/devices/system/node/node{node}")
        with open(f"{sysfs}/devices/system/node/node{node}/cpumap", "w") as f:
            f.write(cpumap + "\n")
    os.makedirs(sysfs + "/class/dmi/id")
    for name, value in dmi.items():
        with open(f"{sysfs}/class/dmi/id/{name}", "w") as f:
            f.write(value + "\n")
    return sysfs


CPUINFO = os.path.join(fixtures, "cpuinfo-epyc")


def run(sysfs, nic_paths, args=(), registry=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WEFT_", "NCCL_", "FI_", "SOFTVERBS_", "SOFTCUDA_"))}
    env.update({"LD_LIBRARY_PATH": plugin_dir + ":" + fake_nccl_dir, "NCCL_NET_PLUGIN": "weft",
                "WEFT_TRANSPORT": "verbs", "WEFT_IBVERBS_LIB": softverbs_lib,
                "SOFTVERBS_DIR": registry, "SOFTVERBS_NODE_ID": "topology-test",
                "SOFTVERBS_DEVICES": str(len(nic_paths)),
                "SOFTVERBS_PCI_PATHS": ",".join(f"{sysfs}/devices/{p}" for p in nic_paths)})
    cmd = [weft_info, "--topo", "--sysfs-root", sysfs, "--cpuinfo", CPUINFO] + list(args)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


# Loads the plugin as NCCL does (ncclNetPlugin_v8: name, then init(logger)),
# calls init, and prints NCCL_TOPO_FILE as the process sees it afterwards,
# then the file it names.
INIT_SCRIPT = r'''
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
class Net(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("init", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p))]
rc = Net.in_dll(lib, "ncclNetPlugin_v8").init(None)
if rc != 0:
    sys.exit(10 + rc)
libc = ctypes.CDLL(None)
libc.getenv.restype = ctypes.c_char_p
value = libc.getenv(b"NCCL_TOPO_FILE")
print(value.decode() if value else None)
if value and value.startswith(b"/proc/self/fd/"):
    sys.stdout.write(open(value.decode()).read())
'''


def plugin_init(sysfs, nic_paths, registry, extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WEFT_", "NCCL_", "FI_", "SOFTVERBS_", "SOFTCUDA_"))}
    env.update({"WEFT_TRANSPORT": "verbs", "WEFT_IBVERBS_LIB": softverbs_lib, "WEFT_DEBUG": "INFO",
                "WEFT_SYSFS_ROOT": sysfs, "SOFTVERBS_DIR": registry,
                "SOFTVERBS_NODE_ID": "topology-test", "SOFTVERBS_DEVICES": str(len(nic_paths)),
                "SOFTVERBS_PCI_PATHS": ",".join(f"{sysfs}/devices/{p}" for p in nic_paths)})
    env.update(extra)
    return subprocess.run([sys.executable, "-c", INIT_SCRIPT, plugin], env=env, capture_output=True,
                          text=True, timeout=120)


def without_cpu_identity(text):
    """The file without the CPU model attributes (this machine's /proc/cpuinfo
    against the recorded one)."""
    return re.sub(r'(<cpu [^>]*?) arch="[^"]*"( vendor="[^"]*")? familyid="[^"]*" modelid="[^"]*"',
                  r"\1", text)


def expect(name, condition, what):
    if not condition:
        failures.append(f"{name}: {what}")


def golden(name, proc):
    path = os.path.join(fixtures, name + ".xml")
    errors = nccl_topology_errors(proc.stdout)
    expect(name, not errors, f"NCCL's grammar: {errors}\n{proc.stdout}")
    if update:
        with open(path, "w") as f:
            f.write(proc.stdout)
        return
    want = open(path).read()
    expect(name, proc.stdout == want, f"differs from {path}:\n{proc.stdout}\nstderr: {proc.stderr}")


GPU, NIC, BRIDGE = "0x030200", "0x020700", "0x060400"
G4, G5 = "16.0 GT/s PCIe", "32.0 GT/s PCIe"

# A two-socket bare-metal server: per socket a root port, a PCIe switch and
# two GPU + NIC pairs below it, plus an NVMe drive that is neither.
bare = []
nics_bare = []
for socket, (hb, bus) in enumerate((("pci0000:00", 0x00), ("pci0000:80", 0x80))):
    rp = f"{hb}/0000:{bus:02x}:01.0"
    up = f"{rp}/0000:{bus + 1:02x}:00.0"
    bare += [(rp, BRIDGE, "0x8086", "0x347a", G5, 16, socket),
             (up, BRIDGE, "0x10b5", "0xc030", G5, 16, socket)]
    for port in range(4):
        down = f"{up}/0000:{bus + 2:02x}:{port:02x}.0"
        dev = f"{down}/0000:{bus + 3 + port:02x}:00.0"
        bare.append((down, BRIDGE, "0x10b5", "0xc030", G5, 16, socket))
        if port % 2 == 0:
            bare.append((dev, GPU, "0x10de", "0x2330", G5, 16, socket))
        else:
            bare.append((dev, NIC, "0x15b3", "0x1021", G5, 16, socket))
            nics_bare.append(dev)
    bare.append((f"{hb}/0000:{bus:02x}:02.0/0000:{bus + 9:02x}:00.0", "0x010802", "0x144d", "0xa80a",
                 G4, 4, socket))
    bare.append((f"{hb}/0000:{bus:02x}:02.0", BRIDGE, "0x8086", "0x347a", G4, 4, socket))

# Azure NDv4: every GPU and every ConnectX-6 VF on a host bridge of its own,
# no link speeds; four NUMA nodes, two GPUs and two NICs each.
ndv4 = []
nics_ndv4 = []
for i in range(8):
    ndv4.append((f"pci{i + 1:04x}:00/{i + 1:04x}:00:00.0", GPU, "0x10de", "0x20b2", "", 0, i // 2))
    path = f"pci{0x101 + i:04x}:00/{0x101 + i:04x}:00:00.0"
    ndv4.append((path, NIC, "0x15b3", "0x101c", "", 0, i // 2))
    nics_ndv4.append(path)
AZURE = {"sys_vendor": "Microsoft Corporation", "product_name": "Virtual Machine"}
CPUMAPS4 = ["00000000,000000ff", "00000000,0000ff00", "00000000,00ff0000", "00000000,ff000000"]

# AWS p4d: eight A100 and four EFA on host bridges of their own (as this
# test lays them out), two NUMA nodes.
p4d = []
nics_p4d = []
for i in range(8):
    p4d.append((f"pci0000:{0x10 + i:02x}/0000:{0x10 + i:02x}:00.0", GPU, "0x10de", "0x20b0", G4, 16,
                i // 4))
for i in range(4):
    path = f"pci0000:{0x20 + i:02x}/0000:{0x20 + i:02x}:00.0"
    p4d.append((path, NIC, "0x1d0f", "0xefa1", G4, 16, i // 2))
    nics_p4d.append(path)

with tempfile.TemporaryDirectory() as tmp:
    registry = tmp + "/registry"
    os.makedirs(registry)

    sysfs = make_tree(tmp + "/bare", bare, ["ffff0000,ffff0000", "0000ffff,0000ffff"],
                      {"sys_vendor": "Supermicro", "product_name": "SYS-821GE-TNHR"})
    # Devices listed in another order than the bus ids: placement follows PCI.
    proc = run(sysfs, list(reversed(nics_bare)), registry=registry)
    expect("bare metal", proc.returncode == 0 and "placed from sysfs" in proc.stderr,
           f"exit {proc.returncode}, stderr {proc.stderr}")
    golden("bare-metal-2-socket", proc)
    expect("bare metal", "0x010802" not in proc.stdout, "the NVMe drive is in the file")

    sysfs = make_tree(tmp + "/ndv4", ndv4, CPUMAPS4, AZURE)
    shuffled = nics_ndv4[3:] + nics_ndv4[:3]
    proc = run(sysfs, shuffled, registry=registry)
    expect("ndv4", proc.returncode == 0 and "placed from table azure-ndv4" in proc.stderr,
           f"exit {proc.returncode}, stderr {proc.stderr}")
    golden("azure-ndv4", proc)

    out = tmp + "/topo.xml"
    proc2 = run(sysfs, shuffled, ["-o", out], registry=registry)
    expect("ndv4 -o", proc2.returncode == 0 and proc2.stdout == "" and
           open(out).read() == proc.stdout and f"export NCCL_TOPO_FILE={out}" in proc2.stderr,
           f"exit {proc2.returncode}, stderr {proc2.stderr}")

    # The same tree as sysfs shows it: written, but nothing pairs (exit 1).
    proc = run(sysfs, shuffled, ["--shape", "sysfs"], registry=registry)
    expect("ndv4 --shape sysfs", proc.returncode == 1 and "placed from sysfs" in proc.stderr and
           not nccl_topology_errors(proc.stdout) and "ffff:ff" not in proc.stdout,
           f"exit {proc.returncode}, stderr {proc.stderr}")

    # A row that is not this node, and a row that does not exist.
    proc = run(sysfs, shuffled, ["--shape", "aws-p4d"], registry=registry)
    expect("ndv4 --shape aws-p4d", proc.returncode == 2 and proc.stdout == "" and
           "this node is not aws-p4d: DMI sys_vendor is 'Microsoft Corporation', not 'Amazon EC2'"
           in proc.stderr, f"exit {proc.returncode}, stderr {proc.stderr}")
    proc = run(sysfs, shuffled, ["--shape", "ndv9"], registry=registry)
    expect("unknown shape", proc.returncode == 2 and
           "unknown shape 'ndv9' (known: azure-ndv4 azure-ndv5 aws-p4d aws-p5, auto, sysfs)"
           in proc.stderr, f"exit {proc.returncode}, stderr {proc.stderr}")

    # A flat tree no row describes (V100s): sysfs, exit 1, and the note says so.
    v100 = [(p, c, v, "0x1db5" if c == GPU else d, s, w, n) for p, c, v, d, s, w, n in ndv4]
    sysfs = make_tree(tmp + "/v100", v100, CPUMAPS4, AZURE)
    proc = run(sysfs, nics_ndv4, registry=registry)
    expect("flat, no row", proc.returncode == 1 and "no row of the instance table matches" in proc.stderr
           and "placed from sysfs" in proc.stderr, f"exit {proc.returncode}, stderr {proc.stderr}")
    proc = run(sysfs, nics_ndv4, ["--shape", "azure-ndv4"], registry=registry)
    expect("flat, forced row", proc.returncode == 2 and
           "this node is not azure-ndv4: GPU 0001:00:00.0 is device 0x1db5" in proc.stderr,
           f"exit {proc.returncode}, stderr {proc.stderr}")

    sysfs = make_tree(tmp + "/p4d", p4d, ["0000ffff", "ffff0000"],
                      {"sys_vendor": "Amazon EC2", "product_name": "p4d.24xlarge"})
    proc = run(sysfs, nics_p4d, registry=registry)
    expect("p4d", proc.returncode == 0 and "placed from table aws-p4d" in proc.stderr,
           f"exit {proc.returncode}, stderr {proc.stderr}")
    golden("aws-p4d", proc)

    # The plugin itself (WEFT_TOPO_FILE=auto): at init on the NDv4 tree it
    # points NCCL_TOPO_FILE at a memory file holding the same layout; not
    # when the user set one, not when off, not where sysfs pairs the devices.
    cases = [("ndv4", tmp + "/ndv4", shuffled, {}, "memfd"),
             ("ndv4, NCCL_TOPO_FILE set", tmp + "/ndv4", shuffled, {"NCCL_TOPO_FILE": "/etc/t.xml"},
              "/etc/t.xml"),
             ("ndv4, WEFT_TOPO_FILE=off", tmp + "/ndv4", shuffled, {"WEFT_TOPO_FILE": "off"}, None),
             ("bare metal", tmp + "/bare", nics_bare, {}, None)]
    for name, root, nic_paths, extra, want in cases:
        proc = plugin_init(root + "/sys", nic_paths, registry, extra)
        lines = proc.stdout.split("\n", 1)
        got = lines[0] if proc.returncode == 0 else f"exit {proc.returncode}"
        if want == "memfd":
            expect(f"plugin init, {name}", got.startswith("/proc/self/fd/") and
                   f"NCCL_TOPO_FILE={got}: the table azure-ndv4 layout of 8 GPUs and 8 NICs" in proc.stderr,
                   f"NCCL_TOPO_FILE {got!r}, stderr {proc.stderr}")
            golden_text = open(os.path.join(fixtures, "azure-ndv4.xml")).read()
            expect(f"plugin init, {name}", without_cpu_identity(lines[1]) == without_cpu_identity(golden_text),
                   f"the memory file differs from azure-ndv4.xml:\n{lines[1]}")
        else:
            expect(f"plugin init, {name}", got == str(want), f"NCCL_TOPO_FILE {got!r}, stderr {proc.stderr}")

    # Bad usage.
    proc = subprocess.run([weft_info, "--topo", "--bogus"], capture_output=True, text=True)
    expect("usage", proc.returncode == 2 and "accepted: -o FILE, --shape" in proc.stderr,
           f"exit {proc.returncode}, stderr {proc.stderr}")
    proc = subprocess.run([weft_info, "--topo", "--shape", "list"], capture_output=True, text=True)
    expect("list", proc.returncode == 0 and "azure-ndv4" in proc.stdout and "aws-p5" in proc.stdout,
           proc.stdout)

# ------------------------------------------ the checker fails broken files ---
good = open(os.path.join(fixtures, "azure-ndv4.xml")).read()
expect("checker", not nccl_topology_errors(good), "the golden file fails the checker")
broken = {
    "tab indentation": good.replace("  <cpu", "\t<cpu", 1),
    "an element NCCL skips": good.replace("<nic>", "<nic>\n<foo/>", 1),
    "pci without class": re.sub(r' class="0x030200"', "", good, count=1),
    "17 attributes": good.replace("<net ", "<net " + " ".join(f'a{i}="1"' for i in range(11)) + " ", 1),
    "version 2": good.replace('version="1"', 'version="2"'),
    "repeated busid": good.replace("0002:00:00.0", "0001:00:00.0"),
    "xml declaration": '<?xml version="1.0"?>\n' + good,
    "unclosed element": good.replace("</system>", ""),
    "net directly under pci": good.replace("<nic>", "", 1).replace("</nic>", "", 1),
    "unknown link speed": good.replace('link_speed="16.0 GT/s PCIe"', 'link_speed="fast"', 1),
    "cpu without arch": re.sub(r' arch="x86_64"', "", good, count=1),
    "repeated net name": re.sub(r'name="softverbs\d+"', 'name="softverbs0"', good),
}
for name, text in broken.items():
    expect("checker", nccl_topology_errors(text), f"does not catch: {name}")

if failures:
    print("FAILED:\n" + "\n\n".join(failures))
    sys.exit(1)
print("topology: all cases passed" + (" (goldens updated)" if update else ""))
