#!/usr/bin/env python3
"""Scale bench: what each command costs as its input grows, in one run.

    bench/scale.py [--quick] [--skip-existing]

Builds nothing but fixtures: it uses target/release/k3d-gpu (run `cargo build --release`
first; BIN=... overrides) and writes every config, facts file and observed document it runs
on into a temporary directory. For each measurement it prints the size, the figure, the growth
factor against the size ten times smaller, and the ratio to its target (<= 1 is a pass).

Figures:
- instructions: `valgrind --tool=callgrind` (Ir), which repeats exactly whatever else the
  machine does;
- CPU: user + system seconds of the process (`/usr/bin/time`), the median of RUNS runs (a busy
  machine stretches wall time, not CPU time);
- memory: the process's peak resident set (`/usr/bin/time` %M), in MB.

Targets (issue 25): validate of the default config on one fixture host <= 25 M instructions;
fleet validate/graph/plan/render at 1,000 nodes <= 0.5 s and <= 100 MB, growth <= 11x per 10x
nodes; report DIR at 1,000 nodes and at 1,000 [[claims]] <= 2 s; one `validate --machines` of
8 configs x 20 hosts <= 0.6 s; plan --observed at 100k objects <= 1.5 s and <= 1.3x the
memory of parsing the document (python's json here is not the baseline: `k3d-gpu observe`
reads it back, see below). Then, unless --skip-existing, the existing targets in the same
run: facts <= 1.5x cat (bench/facts_vs_cat.sh), apply <= 1.1x its critical path and verify
lag <= 100 ms (cargo bench --bench apply / verify). It prints; it never fails.
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
KINDS = ["arc-b580-xe-rpl-igpu", "desktop-rpl-nvidia", "xeon-2s-snc2", "lunar-lake-npu", "gaudi3-server"]
QUICK = "--quick" in sys.argv
RUNS = 1 if QUICK else 3


def measure(args, cwd, runs=RUNS):
    """(cpu seconds, peak MB, exit code) of `k3d-gpu ARGS`, the median of `runs`."""
    cpu, rss, rc = [], [], 0
    with tempfile.NamedTemporaryFile("r") as out:
        for _ in range(runs):
            proc = subprocess.run(
                ["/usr/bin/time", "-f", "%U %S %M", "-o", out.name, BIN, *args],
                cwd=cwd,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            rc = proc.returncode
            out.seek(0)
            user, system, kb = out.read().split()[-3:]
            cpu.append(float(user) + float(system))
            rss.append(int(kb) / 1024)
            if rc not in (0, 2) or (rc == 2 and "--detailed-exitcode" not in args):
                sys.stderr.write(f"  ! {' '.join(args)} exited {rc}: {proc.stderr.decode()[-600:]}\n")
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


def fleet(work, facts, n):
    """An existing cluster of n nodes of the five kinds, each node its own facts file, and the
    observed document of that cluster with its nodes and nothing applied."""
    d = os.path.join(work, f"fleet-{n}")
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


def main():
    if not os.access(BIN, os.X_OK):
        raise SystemExit(f"{BIN} is missing: run `cargo build --release` first")
    work = tempfile.mkdtemp(prefix="k3d-gpu-scale-")
    try:
        empty = os.path.join(work, "empty.toml")
        open(empty, "w").close()
        facts = facts_files(work)

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
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
