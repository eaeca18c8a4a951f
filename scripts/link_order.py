#!/usr/bin/env python3
"""Writes scripts/link-order.txt: the functions of the release binary that its short commands
run, command by command (start-up, facts, validate, plan, the MCP server's plan), for build.rs to hand the linker (`--symbol-ordering-file`).

Why: the binary's code is 21 MB, and a short command runs functions from all over it. Each
first touch of a code page is a page fault that maps the 16 pages around it; `facts` took
about 110 of those. Laid out together, the functions it runs fit in a few dozen pages.

    cargo build --release && scripts/link_order.py     # then rebuild, and review the diff

Names are the linker's (mangled). One that is no longer in the binary (a function renamed,
a dependency or the toolchain updated) is skipped by the linker without a word, so a stale
list costs speed, never the build; `bench/scale.py` says how much of the list the binary
still has. Needs valgrind (callgrind).
"""

import collections
import importlib.util
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("BIN", os.path.join(REPO, "target/release/k3d-gpu"))
OUT = os.path.join(REPO, "scripts/link-order.txt")


def bench():
    """bench/scale.py, for what it measures: its fixture hosts and examples, the documents it
    plans against (a fleet's cluster in place, a cluster with objects to delete) and the MCP
    messages it sends."""
    spec = importlib.util.spec_from_file_location("scale", os.path.join(REPO, "bench/scale.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def commands(work):
    """The runs profiled, as (arguments, working directory, stdin): start-up, facts of every
    fixture host (every detector), validate and an offline plan of every example on its
    host, and a plan against a cluster (a 10-node fleet in place; 1,000 objects to delete)
    from the command line and from the MCP server."""
    # The fixture hosts and the examples (each with the host it is checked against) that
    # the bench measures.
    scale = bench()
    yield ["--version"], REPO, None
    for host in sorted(os.listdir(scale.HOSTS)):
        yield ["facts", "--root", os.path.join(scale.HOSTS, host)], REPO, None
    for example, host in scale.EXAMPLES:
        config = os.path.join(REPO, "examples", f"{example}.toml")
        yield ["validate", "-c", config, "--root", os.path.join(scale.HOSTS, host)], REPO, None
        yield ["plan", "-c", config, "--root", os.path.join(scale.HOSTS, host), "--offline"], REPO, None
    facts = scale.facts_files(work)
    for d, observed in [(scale.fleet(work, facts, 10), "converged.json"),
                        (scale.observed_objects(work, facts, 1000, "objects"), "observed.json")]:
        yield ["plan", "--observed", observed, "--json"], d, None
        arguments = {"config": os.path.join(d, "k3dgpu.toml"), "observed": os.path.join(d, observed)}
        yield ["mcp"], d, scale.mcp_messages(arguments, "plan")


def self_costs(path, binary):
    """Instructions by function of `binary`, from one callgrind output file (its compressed
    `ob=`/`fn=` names: `(id) name` the first time, `(id)` after)."""
    names = {"ob": {}, "fn": {}}
    costs = collections.Counter()
    current_ob = current_fn = None
    after_call = False
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            # The cost line after `calls=` is what the call cost (inclusive), not the caller's own.
            if line.startswith("calls="):
                after_call = True
                continue
            m = re.match(r"^(c?)(ob|fn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
            if m:
                called, kind, ident, name = m.groups()
                if name is not None:
                    names[kind][ident] = name
                if not called and kind == "ob":
                    current_ob = names["ob"].get(ident)
                elif not called and kind == "fn":
                    current_fn = names["fn"].get(ident)
                continue
            # A cost line: a position, then the instruction count (events: Ir).
            if line[:1].isdigit() or line[:1] in "+-*":
                parts = line.split()
                if not after_call and len(parts) >= 2 and current_ob == binary and current_fn:
                    costs[current_fn] += int(parts[1])
                after_call = False
    return costs


def symbol(name):
    """The linker's name for a callgrind function name: without callgrind's recursion mark
    (`'2`); None for what is no symbol (an address, `(below main)`)."""
    name = re.sub(r"'\d+$", "", name)
    if name.startswith("0x") or name.startswith("(") or " " in name:
        return None
    return name


def main():
    binary = os.path.realpath(BIN)
    if not os.path.exists(binary):
        sys.exit(f"{BIN} is missing: run `cargo build --release` first")
    order = {}  # insertion-ordered: the functions of the first run, then those new in the next, ...
    # bench/scale.py runs BIN; it reads the variable when loaded.
    os.environ["BIN"] = binary
    with tempfile.TemporaryDirectory() as work:
        for i, (args, cwd, stdin) in enumerate(commands(work)):
            out = os.path.join(work, f"{i}.out")
            run = subprocess.run(["valgrind", "--tool=callgrind", "--demangle=no", f"--callgrind-out-file={out}",
                                  binary, *args], cwd=cwd, input=stdin, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)
            if not os.path.exists(out):
                sys.exit(f"callgrind wrote nothing for {' '.join(args)}: {run.stderr.decode()[-500:]}")
            costs = self_costs(out, binary)
            # Each run's functions together (start-up's first, shared by all), most
            # instructions first; ties by name, so the file is the same from run to run.
            for name in sorted(costs, key=lambda n: (-costs[n], n)):
                if (sym := symbol(name)) is not None:
                    order.setdefault(sym, None)
    with open(OUT, "w", encoding="utf-8") as f:
        f.writelines(f"{s}\n" for s in order)
    print(f"{OUT}: {len(order)} functions")


if __name__ == "__main__":
    main()
