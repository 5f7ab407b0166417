#!/usr/bin/env python3
"""Rewrite an expected-failures list from a `smelt conformance --json` result.

    scripts/update-xfail.py target/conformance-node.json tests/conformance/node.xfail

Keeps the hand-written reason of every case that still fails; a new failure gets a
reason derived from the failure message (edit it into a real explanation). Cases that
now pass are dropped. A case that failed with an internal error is a bug in smelt: it is
never listed (the suite fails on it anyway) and is named on stderr instead.
Plain Python 3, no dependencies.
"""
import json
import re
import sys


def derive(reason: str) -> str:
    m = re.search(r"unsupported op (\S+) \(domain '([^']*)'", reason)
    if m:
        return f"op {m.group(1)} ({m.group(2)}) is not implemented yet"
    m = re.search(r"(\S+) is not implemented in the reference executor", reason)
    if m:
        return f"op {m.group(1)} has no reference kernel yet"
    reason = re.sub(r"/\S*/", "", reason)
    return reason[:200]


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    result, xfail = sys.argv[1], sys.argv[2]
    old = {}
    header = []
    try:
        with open(xfail, encoding="utf-8") as f:
            for line in f:
                s = line.strip()
                if s.startswith("#") and not old:
                    header.append(line.rstrip("\n"))
                elif s and not s.startswith("#"):
                    name, _, why = s.partition(" ")
                    old[name] = why.strip()
    except FileNotFoundError:
        pass
    with open(result, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    bugs = sorted(c["name"] for c in cases if c["status"] == "fail" and c.get("kind") == "internal")
    for name in bugs:
        print(f"{name}: internal error (a bug in smelt), not listed", file=sys.stderr)
    failed = sorted(
        (c["name"], c["reason"])
        for c in cases
        if c["status"] == "fail" and c.get("kind") != "internal"
    )
    width = max((len(n) for n, _ in failed), default=0)
    with open(xfail, "w", encoding="utf-8") as f:
        for h in header or ["# Cases expected to fail: name, then why. Made by scripts/update-xfail.py."]:
            f.write(h + "\n")
        for name, reason in failed:
            why = old.get(name) or derive(reason)
            f.write(f"{name.ljust(width)}  {why}\n")
    print(f"{xfail}: {len(failed)} expected failures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
