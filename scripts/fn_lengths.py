#!/usr/bin/env python3
"""List the longest Rust functions under a source tree.

A function's length is the number of lines from the line holding `fn NAME`
to the line holding its closing brace, found by brace matching that skips
string literals (plain, byte and raw), char literals and comments.

Usage: scripts/fn_lengths.py [--min N] [--top N] [PATH ...]
PATH defaults to src/. Prints `LINES  FILE:LINE  NAME`, longest first.
"""
import argparse
import os
import re
import sys

FN_RE = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")


def strip(src):
    """Return src with comments and literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif re.match(r"b?r#*\"", src[i:i + 300]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r"b?r(#*)\"", src[i:])
            end = src.find('"' + m.group(1), i + m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == "'":
            # char literal ('x', '\n', '\u{..}') vs lifetime ('a)
            m = re.match(r"'(\\.[^']*|[^\\'])'", src[i:])
            if m:
                out.append(" " * m.end())
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    with open(path, encoding="utf-8") as f:
        text = strip(f.read())
    line_starts = [0]
    for k, ch in enumerate(text):
        if ch == "\n":
            line_starts.append(k + 1)

    def line_of(pos):
        lo, hi = 0, len(line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if line_starts[mid] <= pos:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    for m in FN_RE.finditer(text):
        # the body opens at the first `{` not inside parentheses/angle
        # brackets of the signature; a `;` first means no body (trait item).
        j, paren = m.end(), 0
        while j < len(text):
            ch = text[j]
            if ch in "([":
                paren += 1
            elif ch in ")]":
                paren -= 1
            elif ch == ";" and paren == 0:
                j = -1
                break
            elif ch == "{" and paren == 0:
                break
            j += 1
        if j < 0 or j >= len(text):
            continue
        depth, k = 0, j
        while k < len(text):
            if text[k] == "{":
                depth += 1
            elif text[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        start, end = line_of(m.start()), line_of(k)
        yield end - start + 1, start, m.group(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min", type=int, default=0, help="only functions of at least N lines")
    ap.add_argument("--top", type=int, default=30, help="print at most N rows (0: all)")
    ap.add_argument("paths", nargs="*", default=["src"])
    args = ap.parse_args()
    rows = []
    for root in args.paths:
        files = [root] if os.path.isfile(root) else [
            os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".rs")]
        for path in sorted(files):
            for length, line, name in functions(path):
                if length >= args.min:
                    rows.append((length, path, line, name))
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    if args.top:
        rows = rows[: args.top]
    for length, path, line, name in rows:
        print(f"{length:5d}  {path}:{line}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
