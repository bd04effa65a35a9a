#!/usr/bin/env python3
"""The longest functions of the product's C++ (client, common, coordinator, domain,
worker, trainer; not tests, fakes or benchmarks), longest first:

    python3 tests/function_lengths.py [N]

A function is a brace block opened at namespace or class level whose
signature has a parenthesis; its length runs from the signature's first
line to the closing brace.
"""
import os, re, sys
roots = ["client", "common", "coordinator", "domain", "worker", "trainer"]
out = []
for root in roots:
    for d, _, files in os.walk(root):
        for f in files:
            if not f.endswith((".cc", ".h", ".cu")) or "_test" in f or "/testing" in d or "fake" in f:
                continue
            path = os.path.join(d, f)
            lines = open(path).read().split("\n")
            stack = []; start = None
            for i, line in enumerate(lines):
                code = re.sub(r'"(\\.|[^"\\])*"', '""', re.sub(r"//.*", "", line))
                code = re.sub(r"'(\\.|[^'\\])'", "''", code)
                for ch in code:
                    if ch == "{":
                        is_ns = bool(re.match(r"\s*(namespace\b|extern \"|class |struct )", line)) and all(k == "ns" for k in stack)
                        if is_ns and re.match(r"\s*(class |struct )", line):
                            is_ns = "cls"
                        if all(k in ("ns", "cls") for k in stack) and not is_ns:
                            start = i
                        stack.append("ns" if is_ns == True else ("cls" if is_ns == "cls" else "blk"))
                    elif ch == "}":
                        kind = stack.pop() if stack else None
                        if kind == "blk" and all(k in ("ns", "cls") for k in stack) and start is not None:
                            j = start
                            while j > 0 and lines[j-1].strip() and not lines[j-1].strip().endswith((";", "}", "{")) and not lines[j-1].lstrip().startswith(("//", "#")):
                                j -= 1
                            sig = " ".join(l.strip() for l in lines[j:start+1])
                            if "(" in sig and not sig.startswith(("enum", "union")):
                                out.append((i - j + 1, path, j + 1, sig[:100]))
                            start = None
for n, p, l, s in sorted(out, reverse=True)[:int(sys.argv[1]) if len(sys.argv) > 1 else 12]:
    print(f"{n:4d} {p}:{l} {s}")
