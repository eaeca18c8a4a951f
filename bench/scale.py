#!/usr/bin/env python3
"""Scale bench: what each command costs as its input grows, in one run.

    bench/scale.py [--quick] [--skip-existing]

Builds nothing but fixtures (and, for the baseline of `plan --observed`, a ten-line program
that parses JSON with serde_json, compiled with rustc against the release build's own
serde_json): it uses target/release/k3d-gpu (run `cargo build --release` first; BIN=...
overrides) and writes every config, facts file and observed document it runs on into a
temporary directory. For each measurement it prints the size, the figure, the growth factor
against the size ten times smaller, and the ratio to its target (<= 1 is a pass).

Figures:
- instructions: `valgrind --tool=callgrind` (Ir), which repeats exactly whatever else the
  machine does;
- CPU: user + system seconds of the process (its rusage, from wait4), the median of RUNS runs
  (a busy machine stretches wall time, not CPU time);
- memory: the process's peak resident set (rusage's ru_maxrss), in MB.

Targets (issue 25): validate of the default config on one fixture host <= 25 M instructions;
fleet validate/graph/plan/render at 1,000 nodes <= 0.5 s and <= 100 MB, growth <= 11x per 10x
nodes; report DIR at 1,000 nodes and at 1,000 [[claims]] <= 2 s; one `validate --machines` of
8 configs x 20 hosts <= 0.6 s; plan --observed at 100k objects <= 1.5 s and <= 1.3x the
memory of parsing the document (the serde_json program above); an MCP plan call with a
20k-object observed document <= 1.2x the memory of the CLI's plan. Then, unless
--skip-existing, the older targets in the same run: facts <= 1.5x cat
(bench/facts_vs_cat.sh), apply <= 1.1x its critical path and verify lag <= 100 ms (`cargo
bench --bench apply` / `--bench verify`, which build the benches on their first run). It
prints; it never fails.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("BIN", os.path.join(REPO, "target/release/k3d-gpu"))
HOSTS = os.path.join(REPO, "tests/fixtures/hosts")
FACTS = None
KINDS = ["arc-b580-xe-rpl-igpu", "desktop-rpl-nvidia", "xeon-2s-snc2", "lunar-lake-npu", "gaudi3-server"]
QUICK = "--quick" in sys.argv
SKIP_EXISTING = "--skip-existing" in sys.argv
EXAMPLES = [("nvidia-workstation", "desktop-rpl-nvidia"), ("nvidia-time-slicing", "desktop-rpl-nvidia"),
            ("arc-homelab-dra", "arc-b580-xe-rpl-igpu"), ("lunar-lake-npu", "lunar-lake-npu"),
            ("hybrid-igpu-sharing", "meteor-lake-old-npu-fw"), ("xeon-numa-accelerators", "xeon-2s-snc2"),
            ("wsl2-intel", "wsl2-intel"), ("gaudi-server", "gaudi3-server")]
RUNS = 1 if QUICK else 3


def run_counted(argv, cwd, stdin=None):
    """(cpu seconds, peak MB, exit code, stderr) of one process, from its rusage (wait4:
    microseconds, where /usr/bin/time rounds to 10 ms and a 2 ms process reads 0)."""
    proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if stdin is not None:
        proc.stdin.write(stdin)
        proc.stdin.close()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode, err.decode(errors="replace")


def measure(args, cwd, runs=RUNS):
    """(cpu seconds, peak MB, exit code) of `k3d-gpu ARGS`, the median of `runs`."""
    cpu, rss, rc = [], [], 0
    for _ in range(runs):
        c, mb, rc, err = run_counted([BIN, *args], cwd)
        cpu.append(c)
        rss.append(mb)
        if rc not in (0, 1, 2) or (rc == 2 and "--detailed-exitcode" not in args):
            sys.stderr.write(f"  ! {' '.join(args)} exited {rc}: {err[-600:]}\n")
            break
    return statistics.median(cpu), statistics.median(rss), rc


def instructions(args, cwd):
    """Instructions the process executes (callgrind's Ir)."""
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", BIN, *args],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in proc.stderr.splitlines():
        if "Collected :" in line:
            return int(line.split()[-1])
    raise SystemExit(f"callgrind gave no count for {args}: {proc.stderr[-800:]}")


def row(label, size, figure, unit, prev, target):
    growth = f"{figure / prev:6.1f}x" if prev else "      -"
    ratio = f"{figure / target:5.2f}" if target else "    -"
    verdict = "" if not target else ("PASS" if figure <= target else "FAIL")
    print(f"  {label:<28} {size:>7}  {figure:>10.3f} {unit:<3} growth {growth}  /target {ratio} {verdict}")


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
    for i, name in enumerate(names):
        shutil.copy(facts[KINDS[i % len(KINDS)]], os.path.join(d, "hosts", f"{name}.json"))
        text += f'\n[[nodes]]\nname = "{name}"\nfacts = "hosts/{name}.json"\n'
    with open(os.path.join(d, "k3dgpu.toml"), "w") as f:
        f.write(text)
    nodes = [{"name": n, "labels": {}, "annotations": {}, "allocatable": {}, "ready": True} for n in names]
    observed = {"schema": "k3d-gpu.observed/v1", "cluster": None,
                "kubernetes": {"nodes": nodes, "objects": [], "resource_slices": []}}
    with open(os.path.join(d, "observed.json"), "w") as f:
        json.dump(observed, f)
    return d


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


def observed_objects(work, n, name):
    """A 10-node fleet and an observed document of it holding n ConfigMaps this config made
    and no longer wants (each a delete)."""
    d = fleet(work, FACTS, 10, name)
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
    deps = os.path.join(REPO, "target/release/deps")
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


def measure_program(argv, cwd, stdin=None):
    """(cpu seconds, peak MB) of any program."""
    cpu, mb, _, _ = run_counted(argv, cwd, stdin)
    return cpu, mb


def mcp_plan(d):
    """(cpu, peak MB) of `k3d-gpu mcp` answering one plan call against observed.json."""
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "plan", "arguments": {"config": os.path.join(d, "k3dgpu.toml"),
                                                  "observed": os.path.join(d, "observed.json")}}},
    ]
    # The server answers, then stdin closes and it exits.
    return measure_program([BIN, "mcp"], d, stdin="".join(json.dumps(m) + "\n" for m in msgs).encode())


def existing_targets():
    """The older targets, from their own benches: facts vs cat, apply, verify."""
    print("\nolder targets (their own benches)")
    env = dict(os.environ, BIN=BIN)
    proc = subprocess.run([os.path.join(REPO, "bench/facts_vs_cat.sh"), os.path.join(HOSTS, "desktop-rpl-nvidia"),
                           "30" if QUICK else "100"], cwd=REPO, env=env, capture_output=True, text=True)
    ratio = next((l.split("=")[-1].strip().rstrip("x") for l in proc.stdout.splitlines() if "facts / cat =" in l), None)
    if ratio:
        row("facts / cat (ratio)", 1, float(ratio), "x", None, 1.5)
    else:
        sys.stderr.write(f"  ! facts_vs_cat.sh: {proc.stdout[-300:]}{proc.stderr[-300:]}\n")
    for bench, pick, target, unit in [("apply", "ratio", 1.1, "x"), ("verify", "median", 100.0, "ms")]:
        proc = subprocess.run(["cargo", "bench", "--quiet", "--bench", bench], cwd=REPO,
                              env=dict(os.environ, CARGO_BUILD_JOBS=os.environ.get("CARGO_BUILD_JOBS", "1")),
                              capture_output=True, text=True)
        # The first line naming the figure with a number after it (a later "target: ratio <=
        # 1.1x" line names it too).
        figure = None
        for line in proc.stdout.splitlines():
            words = line.replace(",", " ").split()
            if pick in words and figure is None:
                try:
                    figure = float(words[words.index(pick) + 1].rstrip("x"))
                except (IndexError, ValueError):
                    continue
        if figure is None:
            sys.stderr.write(f"  ! cargo bench --bench {bench}: {proc.stdout[-300:]}{proc.stderr[-300:]}\n")
            continue
        label = "apply / critical path" if bench == "apply" else "verify lag median"
        row(label, 1, figure, unit, None, target)


def main():
    if not os.access(BIN, os.X_OK):
        raise SystemExit(f"{BIN} is missing: run `cargo build --release` first")
    work = tempfile.mkdtemp(prefix="k3d-gpu-scale-")
    try:
        empty = os.path.join(work, "empty.toml")
        open(empty, "w").close()
        facts = facts_files(work)
        global FACTS
        FACTS = facts

        print("catalog: validate of the default config on one fixture host (baseline 236 M before issue 25)")
        for host in ["desktop-rpl-nvidia", "xeon-2s-snc2"]:
            ir = instructions(["validate", "-c", empty, "--root", os.path.join(HOSTS, host)], work)
            row(f"validate {host}", 1, ir / 1e6, "M", None, 25.0)
            if host == "desktop-rpl-nvidia":
                print(f"  {'':<28} vs baseline 236 M: {236e6 / ir:.1f}x fewer")

        sizes = [10, 100] if QUICK else [10, 100, 1000]
        fleets = {n: fleet(work, facts, n) for n in sizes}
        print("\nfleet (existing cluster, 5 machine kinds, one facts file per node): CPU s / peak MB")
        commands = {
            "validate": ["validate"],
            "graph": ["graph", "--json"],
            "plan": ["plan", "--observed", "observed.json", "--json"],
            "render": ["render", "--out", "rendered"],
        }
        for name, args in commands.items():
            prev_cpu = prev_mb = None
            for n in sizes:
                d = fleets[n]
                shutil.rmtree(os.path.join(d, "rendered"), ignore_errors=True)
                cpu, mb, _ = measure(args, d)
                target = n == 1000
                row(f"{name} cpu", n, cpu, "s", prev_cpu, 0.5 if target else None)
                row(f"{name} memory", n, mb, "MB", prev_mb, 100 if target else None)
                prev_cpu, prev_mb = cpu, mb

        print("\nreport DIR --offline: CPU s / peak MB")
        for label, make in [("fleet nodes", lambda n: fleets.get(n) or fleet(work, facts, n)),
                            ("claims", lambda n: claims(work, n))]:
            prev = None
            for n in sizes:
                d = make(n)
                args = ["report", os.path.join(d, "report"), "--offline"]
                if label == "claims":
                    args += ["--root", os.path.join(HOSTS, "arc-b580-xe-rpl-igpu")]
                cpu, mb, _ = measure(args, d, runs=1)
                row(f"report, {label}", n, cpu, "s", prev, 2.0 if n == 1000 else None)
                prev = cpu

        print("\nvalidate --machines: 8 configs x 20 hosts (CPU s)")
        path, pairs = machines(work)
        cpu, mb, rc = measure(["validate", "--machines", path], work)
        row("validate --machines", len(pairs), cpu, "s", None, 0.6)
        if not QUICK:
            each = sum(measure(["validate", "-c", c, "--root", h], work, runs=1)[0] for c, h in pairs)
            row("one process per pair", len(pairs), each, "s", None, None)
            print(f"  {'':<28} one process instead of {len(pairs)}: {each / cpu:.1f}x less CPU")

        print("\nplan --observed of a 10-node fleet with N managed objects to delete: CPU s / peak MB")
        parser = bare_parser(work)
        prev_cpu = prev_mb = None
        for n in ([1000, 10000] if QUICK else [1000, 10000, 100000]):
            d = observed_objects(work, n, f"observed-{n}")
            size = os.path.getsize(os.path.join(d, "observed.json")) / 1e6
            cpu, mb, _ = measure(["plan", "--observed", "observed.json", "--json"], d)
            target = n == 100000
            row(f"plan cpu ({size:.1f} MB doc)", n, cpu, "s", prev_cpu, 1.5 if target else None)
            row("plan memory", n, mb, "MB", prev_mb, None)
            if parser:
                _, parse_mb = measure_program([parser, "observed.json"], d)
                row("  / bare serde_json parse", n, mb / parse_mb, "x", None, 1.3 if target else None)
            prev_cpu, prev_mb = cpu, mb

        print("\nMCP plan call, 20k observed objects: peak MB against the CLI's")
        d = observed_objects(work, 20000, "mcp-20000")
        _, cli_mb, _ = measure(["plan", "--observed", "observed.json", "--json"], d)
        _, mcp_mb = mcp_plan(d)
        row("mcp plan memory", 20000, mcp_mb, "MB", None, None)
        row("  / CLI plan memory", 20000, mcp_mb / cli_mb, "x", None, 1.2)

        if not SKIP_EXISTING:
            existing_targets()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
