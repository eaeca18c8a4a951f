#!/usr/bin/env python3
"""Scale bench: every cost target of issue 42 (and the older ones still held), measured as
the target names it, with goal and figure side by side. Exits 1 when any target is missed.

    bench/scale.py [--quick] [--skip-existing] [--no-write]

It uses target/release/k3d-gpu (run `cargo build --release` first; BIN=... overrides) and
writes every config, facts file and observed document it runs on into a temporary directory.
A full run writes its figures to docs/bench-figures.md (unless --no-write): the figures the
docs quote come from there, never from prose.

Figures:
- instructions: `valgrind --tool=callgrind` (Ir): the same whatever else the machine does;
- CPU: user + system seconds of the process (its rusage, from wait4), the median of RUNS runs
  (a busy machine stretches wall time, not CPU time);
- memory: the process's peak resident set (rusage's ru_maxrss), in MB;
- wall: only where the target is wall time (apply throughput).

Targets (issue 42, whole process, release build):
1. converged fleet plan (every node labelled, every object in place: no action) at 1,000
   nodes <= 0.3 s CPU, and linear: instructions grow <= 11x per 10x nodes;
2. facts <= 1.3x `cat` of exactly the files facts opens (listed by strace), CPU medians;
3. validate of one config on one host <= 15 M instructions (each example on its host, and
   the default config);
4. an MCP call's peak memory <= 1.1x the CLI's for the same call, at every size;
5. apply: 1,000 objects applied and verified against the strict fake API server <= 10 s wall
   (`cargo bench --bench apply_many`);
6. plan --observed with 100k observed objects <= 1.0 s CPU.
Held from issue 25: fleet validate/graph/render at 1,000 nodes <= 0.5 s and 100 MB; report
at 1,000 nodes and at every [[claims]] count (including the 100-150 boxes layout-rs draws)
<= 2 s; validate --machines of 8 x 20 <= 0.6 s; plan --observed at 100k <= 1.3x the memory of
a bare serde_json parse. Unless --skip-existing, the cargo benches' own targets (apply's
critical path, verify lag, validate per pair) by their exit codes.

--quick compares only what cannot flake: instruction counts and their ratios, peak-memory ratios and syscall
counts. On a debug binary (BIN=target/debug/k3d-gpu, as CI runs it after the tests) the
absolute instruction budgets and the MCP memory ratio are figures only (they are a release
build's: a debug binary's peak is mostly its own code pages), the growth ratios are
taken at smaller sizes (converged fleet 5 to 50 nodes, plan of 500 to 5,000 objects) and the
report budgets are left out, so it runs in a few minutes.
"""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.abspath(os.environ.get("BIN", os.path.join(REPO, "target/release/k3d-gpu")))
HOSTS = os.path.join(REPO, "tests/fixtures/hosts")
KINDS = ["arc-b580-xe-rpl-igpu", "desktop-rpl-nvidia", "xeon-2s-snc2", "lunar-lake-npu", "gaudi3-server"]
QUICK = "--quick" in sys.argv
SKIP_EXISTING = "--skip-existing" in sys.argv
WRITE = not QUICK and "--no-write" not in sys.argv
EXAMPLES = [("nvidia-workstation", "desktop-rpl-nvidia"), ("nvidia-time-slicing", "desktop-rpl-nvidia"),
            ("arc-homelab-dra", "arc-b580-xe-rpl-igpu"), ("lunar-lake-npu", "lunar-lake-npu"),
            ("hybrid-igpu-sharing", "meteor-lake-old-npu-fw"), ("xeon-numa-accelerators", "xeon-2s-snc2"),
            ("wsl2-intel", "wsl2-intel"), ("gaudi-server", "gaudi3-server")]
RUNS = 1 if QUICK else 3
FIGURES = os.path.join(REPO, "docs/bench-figures.md")

# Every row printed: (section, label, size, figure, unit, goal, verdict).
ROWS = []
CURRENT = [""]


def section(title):
    CURRENT[0] = title
    print(f"\n{title}")


def row(label, size, figure, unit, goal=None, note=""):
    """Prints one figure beside its goal (`<= goal`); a missed goal is recorded as a FAIL."""
    if goal is None:
        verdict, shown = "", ""
    else:
        verdict = "PASS" if figure <= goal else "FAIL"
        shown = f"<= {goal:g} {unit}"
    print(f"  {label:<36} {size:>7}  {figure:>10.3f} {unit:<3} goal {shown:<14} {verdict} {note}".rstrip())
    ROWS.append((CURRENT[0], label, size, figure, unit, goal, verdict, note))


def failed(label, why):
    """A measurement that could not be made counts as a miss."""
    print(f"  {label:<36} FAIL: {why}")
    ROWS.append((CURRENT[0], label, "", float("nan"), "", None, "FAIL", why))


def usage_of(argv, cwd, stdin=None, stdout=subprocess.DEVNULL):
    """(rusage, exit code, stderr) of one process."""
    proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=stdout, stderr=subprocess.PIPE)
    if stdin is not None:
        proc.stdin.write(stdin)
        proc.stdin.close()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    return usage, os.waitstatus_to_exitcode(status), err.decode(errors="replace")


def rusage_of(argv, cwd, stdin=None, stdout=subprocess.DEVNULL):
    """(cpu seconds, peak MB, exit code, stderr) of one process, from its own rusage."""
    usage, rc, err = usage_of(argv, cwd, stdin, stdout)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, rc, err


GNU_TIME = "/usr/bin/time"


def peak_mb(argv, cwd, stdin=None):
    """Peak resident MB of one process, as GNU time (a small process) reports its child's.
    Linux counts in a child's ru_maxrss the memory of the process it was forked from, up to
    its exec: measured straight from here, every figure is at least this Python process's
    resident size (over 120 MB once the 100k-object documents are made). None when GNU time
    is missing (.ci/apt.sh installs it)."""
    if not os.access(GNU_TIME, os.X_OK):
        return None
    with tempfile.NamedTemporaryFile(mode="r", suffix=".time") as out:
        subprocess.run([GNU_TIME, "-f", "%M", "-o", out.name, *argv], cwd=cwd, input=stdin,
                       stdin=None if stdin is not None else subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        lines = out.read().split()
    return int(lines[-1]) / 1024 if lines and lines[-1].isdigit() else None


def measure(args, cwd, runs=RUNS):
    """(cpu seconds, peak MB, exit code) of `k3d-gpu ARGS`, the median of `runs` (CPU from
    each run's own rusage; the peak from one more run under GNU time, see `peak_mb`)."""
    cpu, rss, rc = [], [], 0
    for _ in range(runs):
        c, mb, rc, err = rusage_of([BIN, *args], cwd)
        cpu.append(c)
        rss.append(mb)
        if rc not in (0, 1, 2) or (rc == 2 and "--detailed-exitcode" not in args):
            sys.stderr.write(f"  ! {' '.join(args)} exited {rc}: {err[-600:]}\n")
            break
    mb = peak_mb([BIN, *args], cwd)
    return statistics.median(cpu), mb if mb is not None else statistics.median(rss), rc


def instructions(argv, cwd):
    """Instructions the process executes (callgrind's Ir)."""
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in proc.stderr.splitlines():
        if "Collected :" in line:
            return int(line.split()[-1])
    raise SystemExit(f"callgrind gave no count for {argv}: {proc.stderr[-800:]}")


def quick_sizes(release, debug):
    """The sizes a quick growth check compares: a release build's, or on a debug build
    smaller ones (still 10x apart), so that callgrind of a debug binary (several times a
    release build's instructions, each some 50x slower under callgrind) fits a CI step of a
    few minutes. The fixed cost weighs more at the small end, so the debug ratio is a weaker
    check than the release build's; a path quadratic in the input still shows."""
    return release if is_release() else debug


def is_release():
    """Whether BIN is an optimised build: the absolute instruction budgets are a release
    build's (a debug build executes several times more)."""
    return "/debug/" not in os.path.realpath(BIN)


def facts_files(work):
    """facts/v1 of each fixture kind, written once."""
    out = {}
    for kind in KINDS:
        path = os.path.join(work, f"{kind}.json")
        with open(path, "wb") as f:
            subprocess.run([BIN, "facts", "--root", os.path.join(HOSTS, kind)], stdout=f, check=True)
        out[kind] = path
    return out


def fleet(work, facts, n, name=None):
    """An existing cluster of n nodes of the five kinds, each node its own facts file, and the
    observed document of that cluster with its nodes and nothing applied."""
    d = os.path.join(work, name or f"fleet-{n}")
    os.makedirs(os.path.join(d, "hosts"))
    names = [f"node-{i:04d}" for i in range(n)]
    text = '[cluster]\nprovider = "existing"\ncontext = "bench"\n'
    for i, node in enumerate(names):
        shutil.copy(facts[KINDS[i % len(KINDS)]], os.path.join(d, "hosts", f"{node}.json"))
        text += f'\n[[nodes]]\nname = "{node}"\nfacts = "hosts/{node}.json"\n'
    with open(os.path.join(d, "k3dgpu.toml"), "w") as f:
        f.write(text)
    nodes = [{"name": n, "labels": {}, "annotations": {}, "allocatable": {}, "ready": True} for n in names]
    observed = {"schema": "k3d-gpu.observed/v1", "cluster": None,
                "kubernetes": {"nodes": nodes, "objects": [], "resource_slices": []}}
    with open(os.path.join(d, "observed.json"), "w") as f:
        json.dump(observed, f)
    converge(d)
    return d


# The associative lists of the kinds the catalog applies, by their merge keys (k8s.io/api's
# `patchMergeKey` / `listMapKeys`): their elements are owned one by one, as `k:{...}`; every
# other list is atomic, owned whole.
LIST_KEYS = {"containers": ("name",), "initContainers": ("name",), "env": ("name",), "volumes": ("name",),
             "volumeMounts": ("mountPath",), "ports": ("containerPort", "protocol")}


def owned_fields(value, field=None):
    """structured-merge-diff's FieldsV1 of the fields a server-side apply of `value` sets
    (fieldpath/serialize.go): a map's keys as `f:` elements; an element of an associative
    list as `k:` and its keys in compact JSON, with `.` for the element itself."""
    if isinstance(value, dict):
        return {f"f:{k}": owned_fields(v, k) for k, v in value.items()}
    keys = LIST_KEYS.get(field)
    if isinstance(value, list) and keys and all(isinstance(e, dict) for e in value):
        owned = {}
        for e in value:
            key = json.dumps({k: e.get(k, "TCP" if k == "protocol" else None) for k in keys}, separators=(",", ":"))
            owned[f"k:{key}"] = {".": {}, **owned_fields(e)}
        return owned
    return {}


def served(o, index):
    """The object as the API server serves it after k3d-gpu's apply: identity and bookkeeping
    metadata, our managedFields entry (identity fields aside, as the server records it),
    defaults the server fills in that nobody applied, and a status. The plan digests and
    compares these through the managed fields, as it does a real cluster's objects."""
    o = json.loads(json.dumps(o))
    applied = {k: v for k, v in o.items() if k not in ("apiVersion", "kind")}
    applied["metadata"] = {k: v for k, v in o.get("metadata", {}).items() if k not in ("name", "namespace")}
    meta = o.setdefault("metadata", {})
    meta.update({"uid": f"uid-{index}", "resourceVersion": str(1000 + index), "generation": 1,
                 "creationTimestamp": "2026-12-01T00:00:00Z"})
    meta["managedFields"] = [{"manager": "k3d-gpu", "operation": "Apply", "apiVersion": o.get("apiVersion"),
                              "time": "2026-12-01T00:00:00Z", "fieldsType": "FieldsV1",
                              "fieldsV1": owned_fields(applied)}]
    pod = o.get("spec", {}).get("template", {}).get("spec")
    if isinstance(pod, dict):
        pod.setdefault("restartPolicy", "Always")
        pod.setdefault("schedulerName", "default-scheduler")
        for c in pod.get("containers", []):
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("imagePullPolicy", "IfNotPresent")
            for port in c.get("ports", []):
                port.setdefault("protocol", "TCP")
        o["status"] = {"observedGeneration": 1, "numberReady": 1} if o.get("kind") == "DaemonSet" else {
            "observedGeneration": 1, "replicas": 1, "readyReplicas": 1}
    return o


def converge(d):
    """converged.json: the cluster after an apply of the fleet's graph — every node with its
    labels and annotations (and the annotation recording which labels are k3d-gpu's), every
    object in place as the API server serves it (`served`) — so a plan of it has nothing to
    do and still reads everything."""
    out = subprocess.run([BIN, "graph", "--json"], cwd=d, capture_output=True, check=True).stdout
    graph = json.loads(out)
    with open(os.path.join(d, "observed.json")) as f:
        observed = json.load(f)
    nodes = {n["name"]: n for n in observed["kubernetes"]["nodes"]}
    managed = {}
    objects = []
    for r in graph["resources"]:
        spec = r["spec"]
        if r["kind"] in ("node-label", "node-annotation"):
            node = nodes[spec["node"]]
            field = "labels" if r["kind"] == "node-label" else "annotations"
            node[field][spec["key"]] = spec["value"]
            if r["kind"] == "node-label":
                managed.setdefault(spec["node"], []).append(spec["key"])
        elif r["kind"] == "object":
            objects.append(served(spec, len(objects)))
    for name, keys in managed.items():
        nodes[name]["annotations"]["k3d-gpu.io/managed-labels"] = ",".join(keys)
    observed["kubernetes"]["objects"] = objects
    with open(os.path.join(d, "converged.json"), "w") as f:
        json.dump(observed, f)


def plan_actions(d, observed):
    """The number of actions of `plan --observed OBSERVED`."""
    out = subprocess.run([BIN, "plan", "--observed", observed, "--json"], cwd=d, capture_output=True).stdout
    try:
        return len(json.loads(out)["actions"])
    except (ValueError, KeyError):
        return -1


def claims(work, n):
    d = os.path.join(work, f"claims-{n}")
    os.makedirs(d)
    text = '[sharing]\nmode = "dra"\n'
    for i in range(n):
        text += f'\n[[claims]]\nname = "claim-{i:04d}"\nnamespace = "ns-{i % 10}"\ngpus = "all"\n'
    with open(os.path.join(d, "k3dgpu.toml"), "w") as f:
        f.write(text)
    return d


def machines(work):
    """8 configs (the examples) x 20 hosts (the fixture hosts, under 20 names, so each is read
    as its own host): the machines file, and the pairs."""
    d = os.path.join(work, "machines")
    os.makedirs(d)
    hosts = sorted(h for h in os.listdir(HOSTS) if os.path.isdir(os.path.join(HOSTS, h)))
    names = []
    for i in range(20):
        name = os.path.join(d, f"host-{i:02d}")
        os.symlink(os.path.join(HOSTS, hosts[i % len(hosts)]), name)
        names.append(name)
    pairs = [(os.path.join(REPO, "examples", f"{e}.toml"), h) for e, _ in EXAMPLES for h in names]
    path = os.path.join(d, "k3dgpu-machines.txt")
    with open(path, "w") as f:
        f.write("".join(f"{c} {h}\n" for c, h in pairs))
    return path, pairs


def observed_objects(work, facts, n, name):
    """A 10-node fleet and an observed document of it holding n ConfigMaps this config made
    and no longer wants (each a delete)."""
    d = fleet(work, facts, 10, name)
    with open(os.path.join(d, "observed.json")) as f:
        observed = json.load(f)
    observed["kubernetes"]["objects"] = [
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": f"cm-{i:06d}", "namespace": f"ns-{i % 100}", "uid": f"uid-{i:06d}",
                      "resourceVersion": str(i),
                      "labels": {"app.kubernetes.io/managed-by": "k3d-gpu", "k3d-gpu.io/config": "gpu"}},
         "data": {"key": f"value-{i}"}}
        for i in range(n)]
    with open(os.path.join(d, "observed.json"), "w") as f:
        json.dump(observed, f)
    return d


PARSE_RS = """
fn main() {
    let path = std::env::args().nth(1).expect("a file");
    let bytes = std::fs::read(path).expect("readable");
    let value: serde_json::Value = serde_json::from_slice(&bytes).expect("JSON");
    drop(bytes);
    println!("{}", value.as_object().map_or(0, |o| o.len()));
}
"""


def bare_parser(work):
    """A program that only reads and parses a JSON document with the release build's own
    serde_json (the baseline of `plan --observed`), or None if it cannot be built here."""
    deps = os.path.join(os.path.dirname(BIN), "deps")
    if not os.path.isdir(deps):
        return None
    libs = sorted((os.path.join(deps, f) for f in os.listdir(deps) if f.startswith("libserde_json-") and f.endswith(".rlib")),
                  key=os.path.getmtime)
    if not libs:
        return None
    src = os.path.join(work, "parse.rs")
    with open(src, "w") as f:
        f.write(PARSE_RS)
    out = os.path.join(work, "parse-json")
    proc = subprocess.run(["rustc", "--edition", "2021", "-O", "-L", deps, "--extern", f"serde_json={libs[-1]}",
                           src, "-o", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.stderr.write(f"  ! the serde_json baseline did not build: {proc.stderr[-400:]}\n")
        return None
    return out


def mcp_messages(arguments, tool):
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}},
    ]
    # The server answers, then stdin closes and it exits.
    return "".join(json.dumps(m) + "\n" for m in msgs).encode()


def mcp_against_cli(label, size, d, cli_args, tool, arguments, goal=1.1):
    """One MCP call against the CLI doing the same: peak memory of each, and the ratio. The
    goal is a release build's: a debug binary's peak is mostly its own code pages (the server
    touches rmcp's and tokio's beside the command's), so there the ratio is a figure only."""
    goal = goal if is_release() else None
    _, cli_mb, _ = measure(cli_args, d, runs=1)
    _, mcp_mb, rc, err = rusage_of([BIN, "mcp"], d, stdin=mcp_messages(arguments, tool))
    if rc != 0:
        failed(f"mcp {label}", f"exited {rc}: {err[-200:]}")
        return
    # Medians of three peaks each: a small process's peak moves by 0.4 MB from run to run
    # (13.1 to 13.5 MB for the CLI's 10-node plan), 3% of it, which one sample each put on
    # either side of the goal.
    cli_peaks = [peak_mb([BIN, *cli_args], d) for _ in range(3)]
    mcp_peaks = [peak_mb([BIN, "mcp"], d, stdin=mcp_messages(arguments, tool)) for _ in range(3)]
    if None not in cli_peaks + mcp_peaks:
        cli_mb, mcp_mb = statistics.median(cli_peaks), statistics.median(mcp_peaks)
    row(f"mcp {label}: MB (CLI {cli_mb:.1f} MB)", size, mcp_mb, "MB")
    row(f"  / the CLI's peak", size, mcp_mb / cli_mb, "x", goal)


def opened_files(argv, cwd):
    """The regular files a process opens (strace), in order, each once: the files `facts`
    reads, which is the floor `cat` pays. Also the count of each syscall it made."""
    log = os.path.join(tempfile.mkdtemp(prefix="k3d-gpu-strace-"), "trace")
    # -y: facts opens a file by its name in a directory it holds open; strace then prints the
    # directory's path beside its descriptor (`openat(3</abs/dir>, "vendor", ...)`; the working
    # directory beside AT_FDCWD).
    subprocess.run(["strace", "-f", "-qq", "-y", "-e", "trace=open,openat,openat2", "-e", "status=successful",
                    "-o", log, *argv], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    # The descriptor's path is the kernel's, with any link above the checkout resolved.
    hosts = (HOSTS + os.sep, os.path.realpath(HOSTS) + os.sep)
    files, seen = [], set()
    with open(log) as f:
        for line in f:
            m = re.search(r'open(?:at2?)?\((?:(?:AT_FDCWD|\d+)(?:<((?:[^>\\]|\\.)*)>)?, )?"((?:[^"\\]|\\.)*)"', line)
            if not m or "O_DIRECTORY" in line:
                continue
            at, path = m.group(1), m.group(2)
            full = path if os.path.isabs(path) else os.path.join(at if at is not None else cwd, path)
            # The binary's own libraries and the locale are every process's start-up, which
            # cat pays too; only what detection reads counts.
            if not full.startswith(hosts) or not os.path.isfile(full) or full in seen:
                continue
            seen.add(full)
            files.append(full)
    shutil.rmtree(os.path.dirname(log), ignore_errors=True)
    return files


def syscalls(argv, cwd):
    """(total syscalls, count by name) of one process (strace -c)."""
    proc = subprocess.run(["strace", "-f", "-c", "-U", "name,calls", "-o", "/dev/stderr", *argv], cwd=cwd,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    counts = {}
    for line in proc.stderr.splitlines():
        words = line.split()
        if len(words) == 2 and words[1].isdigit() and words[0] != "total":
            counts[words[0]] = int(words[1])
    return sum(counts.values()), counts


def facts_vs_cat(work):
    section("2. facts against `cat` of exactly the files facts opens (strace)")
    host = os.path.join(HOSTS, "desktop-rpl-nvidia")
    files = opened_files([BIN, "facts", "--root", host], work)
    if not files:
        failed("facts / cat", "strace listed no file")
        return
    facts_argv = [BIN, "facts", "--root", host]
    cat_argv = ["cat", *files]
    print(f"  desktop-rpl-nvidia: facts opens {len(files)} files; cat reads the same {len(files)}")
    total_f, by_f = syscalls(facts_argv, work)
    total_c, _ = syscalls(cat_argv, work)
    stats = by_f.get("statx", 0) + by_f.get("newfstatat", 0) + by_f.get("stat", 0) + by_f.get("lstat", 0)
    row("facts syscalls / cat's", len(files), total_f / total_c, "x", 2.0,
        f"({total_f} against {total_c}; {stats} stat calls)")
    if is_release():
        link_order_coverage()
    if QUICK:
        if is_release():
            row("facts instructions", 1, instructions(facts_argv, work) / 1e6, "M", 4.0)
        return
    # Interleaved, so a busy spell slows both sides alike; CPU time (rusage), not wall.
    runs = 200
    f_cpu, c_cpu = [], []
    for _ in range(20):
        rusage_of(facts_argv, work)
        rusage_of(cat_argv, work)
    for _ in range(runs):
        f_cpu.append(rusage_of(facts_argv, work)[0])
        c_cpu.append(rusage_of(cat_argv, work)[0])
    f_ms, c_ms = statistics.median(f_cpu) * 1e3, statistics.median(c_cpu) * 1e3
    row(f"facts CPU ms (cat {c_ms:.3f} ms)", runs, f_ms, "ms")
    row("facts / cat", runs, f_ms / c_ms, "x", 1.3)
    faults = [usage_of(argv, work)[0].ru_minflt for argv in (facts_argv, cat_argv)]
    row("facts page faults / cat's", 1, faults[0] / faults[1], "x")


def link_order_coverage():
    """How much of scripts/link-order.txt the binary still has: the functions the short
    commands run, which build.rs has the linker lay out together (a page fault of code maps
    16 pages; spread over 21 MB of code, `facts` took 40% more faults and CPU). A function
    renamed, a dependency or the toolchain updated drops names from the binary without a
    word; past a tenth, regenerate the list (scripts/link_order.py)."""
    with open(os.path.join(REPO, "scripts/link-order.txt"), encoding="utf-8") as f:
        listed = set(f.read().split())
    nm = subprocess.run(["nm", "--defined-only", BIN], capture_output=True, text=True)
    if nm.returncode != 0:
        failed("link order", f"nm could not read {BIN}")
        return
    present = {line.split()[-1] for line in nm.stdout.splitlines() if line.strip()}
    missing = len(listed - present)
    row("link order: listed, not in binary", len(listed), 100 * missing / len(listed), "%", 10.0)


def validate_instructions(work):
    section("3. validate of one config on one host: instructions (callgrind)")
    empty = os.path.join(work, "empty.toml")
    open(empty, "w").close()
    goal = 15.0 if is_release() else None
    pairs = [("default config", empty, "desktop-rpl-nvidia")]
    pairs += [(e, os.path.join(REPO, "examples", f"{e}.toml"), h) for e, h in EXAMPLES]
    if QUICK:
        pairs = [pairs[0], pairs[-1]]
    for label, config, host in pairs:
        ir = instructions([BIN, "validate", "-c", config, "--root", os.path.join(HOSTS, host)], work)
        row(f"{label} on {host}"[:36], 1, ir / 1e6, "M", goal)


def fleet_plan(work, facts):
    section("1. converged fleet plan (nothing to do): instructions and CPU s per 10x nodes")
    sizes = quick_sizes([10, 100], [5, 50]) if QUICK else [10, 100, 1000]
    fleets = {}
    prev_ir = prev_cpu = None
    for n in sizes:
        d = fleets[n] = fleet(work, facts, n)
        args = ["plan", "--observed", "converged.json", "--json"]
        actions = plan_actions(d, "converged.json")
        if actions != 0:
            failed(f"converged plan at {n}", f"the converged cluster plans {actions} actions, not 0")
            continue
        # Instructions up to 100 nodes (callgrind of 1,000 would take minutes); CPU beyond.
        if n <= 100 or QUICK:
            ir = instructions([BIN, *args], d)
            row("converged plan instructions", n, ir / 1e6, "M")
            if prev_ir:
                row("  growth per 10x nodes", n, ir / prev_ir, "x", 11.0)
            prev_ir = ir
        if not QUICK:
            cpu, mb, _ = measure(args, d)
            row("converged plan CPU", n, cpu, "s", 0.3 if n == 1000 else None)
            if n == 1000 and prev_cpu:
                row("  CPU growth per 10x nodes", n, cpu / prev_cpu, "x", 11.0)
            row("converged plan memory", n, mb, "MB", 100 if n == 1000 else None)
            prev_cpu = cpu
    return fleets


def fleet_commands(fleets):
    section("fleet validate / graph / render / fresh plan (issue 25): CPU s / peak MB")
    commands = {
        "validate": ["validate"],
        "graph": ["graph", "--json"],
        "plan from scratch": ["plan", "--observed", "observed.json", "--json"],
        "render": ["render", "--out", "rendered"],
    }
    for name, args in commands.items():
        prev = None
        for n, d in sorted(fleets.items()):
            shutil.rmtree(os.path.join(d, "rendered"), ignore_errors=True)
            cpu, mb, _ = measure(args, d)
            top = n == 1000
            row(f"{name} CPU", n, cpu, "s", 0.5 if top else None, f"growth {cpu / prev:.1f}x" if prev else "")
            row(f"{name} memory", n, mb, "MB", 100 if top else None)
            prev = cpu


def reports(work, facts, fleets):
    section("report DIR --offline (issue 25): CPU s; claims from a handful to past layout-rs's range")
    for n, d in sorted(fleets.items()):
        cpu, _, _ = measure(["report", os.path.join(d, "report"), "--offline"], d, runs=1)
        row("report, fleet nodes", n, cpu, "s", 2.0)
    root = os.path.join(HOSTS, "arc-b580-xe-rpl-igpu")
    sizes = [10, 40, 50, 60, 70, 1000] if QUICK else [10, 30, 40, 50, 60, 70, 80, 100, 1000]
    for n in sizes:
        d = claims(work, n)
        args = ["report", os.path.join(d, "report"), "--offline", "--root", root]
        boxes = graph_boxes(d, root)
        if QUICK:
            if is_release():
                row(f"report, claims ({boxes} boxes)", n, instructions([BIN, *args], d) / 1e6, "M", 1500.0)
        else:
            cpu, _, _ = measure(args, d, runs=1)
            row(f"report, claims ({boxes} boxes)", n, cpu, "s", 2.0)


def graph_boxes(d, root):
    """How many resources the report graph has (a box each, up to the grouping threshold)."""
    out = subprocess.run([BIN, "graph", "--json", "--root", root], cwd=d, capture_output=True).stdout
    try:
        return len(json.loads(out)["resources"])
    except (ValueError, KeyError):
        return -1


def validate_machines(work):
    section("validate --machines (issue 25): 8 configs x 20 hosts, CPU s")
    path, pairs = machines(work)
    cpu, _, _ = measure(["validate", "--machines", path], work)
    row("validate --machines", len(pairs), cpu, "s", 0.6)


def observed_plan(work, facts, parser):
    section("6. plan --observed of a 10-node fleet with N managed objects to delete: CPU s / peak MB")
    prev = None
    for n in [1000, 10000, 100000]:
        d = observed_objects(work, facts, n, f"observed-{n}")
        size = os.path.getsize(os.path.join(d, "observed.json")) / 1e6
        top = n == 100000
        # Five runs at the size with the goal: one second of CPU on a 2-core machine varies
        # by a tenth from run to run, and the median of three still strayed past the goal.
        cpu, mb, _ = measure(["plan", "--observed", "observed.json", "--json"], d, runs=max(RUNS, 5) if top else RUNS)
        row(f"plan CPU ({size:.1f} MB doc)", n, cpu, "s", 1.0 if top else None,
            f"growth {cpu / prev:.1f}x" if prev else "")
        row("plan memory", n, mb, "MB")
        if parser:
            _, parse_mb, _, _ = rusage_of([parser, "observed.json"], d)
            parse_mb = peak_mb([parser, "observed.json"], d) or parse_mb
            row("  / bare serde_json parse", n, mb / parse_mb, "x", 1.3 if top else None)
        prev = cpu


def observed_plan_quick(work, facts):
    section("6. plan --observed, quick: instructions per 10x objects")
    prev = None
    for n in quick_sizes([1000, 10000], [500, 5000]):
        d = observed_objects(work, facts, n, f"observed-{n}")
        ir = instructions([BIN, "plan", "--observed", "observed.json", "--json"], d)
        row("plan instructions", n, ir / 1e6, "M")
        if prev:
            row("  growth per 10x objects", n, ir / prev, "x", 11.0)
        prev = ir


def mcp(work, facts, fleets):
    section("4. MCP call against the CLI's same call: peak MB, at every size")
    for n in ([10] if QUICK else [10, 100, 1000]):
        d = fleets.get(n) or fleet(work, facts, n, f"mcp-fleet-{n}")
        mcp_against_cli("plan, fleet", n, d, ["plan", "--observed", "converged.json", "--json"], "plan",
                        {"config": os.path.join(d, "k3dgpu.toml"), "observed": os.path.join(d, "converged.json")})
    for n in ([1000] if QUICK else [1000, 20000, 100000]):
        d = observed_objects(work, facts, n, f"mcp-{n}")
        mcp_against_cli("plan, observed objects", n, d, ["plan", "--observed", "observed.json", "--json"], "plan",
                        {"config": os.path.join(d, "k3dgpu.toml"), "observed": os.path.join(d, "observed.json")})


def cargo_benches():
    """The cargo benches' own targets, by their exit codes (each exits 1 on a miss), and the
    figure lines they print."""
    section("5. and the cargo benches (apply throughput, apply critical path, verify lag, validate per pair)")
    env = dict(os.environ, CARGO_BUILD_JOBS=os.environ.get("CARGO_BUILD_JOBS", "1"))
    # bench: (what its output says, goal, unit, label); a goal of None is a figure only.
    picks = [
        ("apply_many", r"wall ([\d.]+) s", 10.0, "s", "5. apply 1,000 objects, wall"),
        ("apply", r"ratio ([\d.]+)x", 1.1, "x", "apply / critical path"),
        ("verify", r"median ([\d.]+) ms", 100.0, "ms", "verify lag median"),
        ("validate", r"worst ([\d.]+) ms", 2.0, "ms", "validate per pair, worst"),
        ("fleet", r"(\d+) requests", None, "req", "fleet observe, 100 nodes: requests"),
        ("fleet", r"plan, converged cluster: ([\d.]+) ms", 100.0, "ms", "fleet plan, 100 nodes, converged"),
    ]
    outputs = {}
    for bench, pattern, goal, unit, label in picks:
        if bench not in outputs:
            outputs[bench] = subprocess.run(["cargo", "bench", "--quiet", "--bench", bench], cwd=REPO, env=env,
                                            capture_output=True, text=True)
        proc = outputs[bench]
        m = re.search(pattern, proc.stdout)
        if not m:
            failed(label, f"cargo bench --bench {bench} printed no figure: {proc.stdout[-200:]}{proc.stderr[-300:]}")
            continue
        figure = float(m.group(1))
        row(label, 1, figure, unit, goal)
        if goal is not None and proc.returncode != 0 and figure <= goal:
            failed(label, f"cargo bench --bench {bench} exited {proc.returncode}")


def write_figures():
    """docs/bench-figures.md: this run's figures, which the docs point at."""
    load = os.getloadavg()
    lines = [
        "# Bench figures",
        "",
        "Written by `bench/scale.py` (its last full run); not edited by hand. The docs quote no",
        "cost figure of their own: they point here. Release build, whole process.",
        "",
        f"Load average at the end of the run: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}. Machine: "
        f"{os.cpu_count()} CPUs.",
        "",
        "| what | size | figure | goal | |",
        "|---|---|---|---|---|",
    ]
    last = None
    for sec, label, size, figure, unit, goal, verdict, note in ROWS:
        if sec != last:
            lines.append(f"| **{sec}** | | | | |")
            last = sec
        shown = "-" if figure != figure else f"{figure:.3f} {unit}"
        goal_s = f"<= {goal:g} {unit}" if goal is not None else ""
        text = (label.strip() + (f" {note}" if note else "")).replace("|", "/")
        lines.append(f"| {text} | {size} | {shown} | {goal_s} | {verdict} |")
    with open(FIGURES, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    if not os.access(BIN, os.X_OK):
        raise SystemExit(f"{BIN} is missing: run `cargo build --release` first")
    print(f"binary: {BIN} ({'release' if is_release() else 'debug: instruction budgets skipped, ratios only'})"
          f"{'; quick mode' if QUICK else ''}")
    work = tempfile.mkdtemp(prefix="k3d-gpu-scale-")
    try:
        facts = facts_files(work)
        validate_instructions(work)
        fleets = fleet_plan(work, facts)
        facts_vs_cat(work)
        mcp(work, facts, fleets)
        if QUICK:
            observed_plan_quick(work, facts)
            # Report costs are instruction budgets of a release build: nothing to compare
            # on a debug one.
            if is_release():
                reports(work, facts, {})
        else:
            observed_plan(work, facts, bare_parser(work))
            fleet_commands(fleets)
            reports(work, facts, fleets)
            validate_machines(work)
            if not SKIP_EXISTING:
                cargo_benches()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    misses = [r for r in ROWS if r[6] == "FAIL"]
    load = os.getloadavg()
    print(f"\n{len(ROWS)} figures, {sum(r[5] is not None for r in ROWS)} with a goal, {len(misses)} missed;"
          f" load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for sec, label, size, figure, unit, goal, _, note in misses:
        print(f"  MISSED: {label.strip()} at {size}: {figure:.3f} {unit} (goal <= {goal}) {note}")
    if WRITE:
        write_figures()
        print(f"wrote {os.path.relpath(FIGURES, REPO)}")
    sys.exit(1 if misses else 0)


if __name__ == "__main__":
    main()
