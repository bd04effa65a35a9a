#!/usr/bin/env python3
"""The order of the tree's packages, checked on Bazel's dependency graph.

Each package is in a layer; a target may depend on its own package and on
packages of lower layers, never on a higher one nor on another package of
its own layer (the programs do not reach into each other: what two of them
share goes below them, in domain/). The coordinator's packages have an
order of their own inside its layer (COORDINATOR). Test targets are left out: a test may
reach where it checks.

    bazel query 'deps(kind(rule, //...) except kind(".*_test", //...), 1)' \\
        --output=graph --nograph:factored | python3 tests/package_order.py

prints each arrow against the order, "//trainer:x -> //client:y (trainer may
not depend on client)", and exits 1 when there is one.
"""
import re
import sys

# The coordinator's own packages, lowest first, in the same way: the model
# of jobs and workers, and the stores' interfaces beside it; what decides
# about them (placement, health) and the engines that store them; the
# manager of jobs; the services and their wiring; the binary.
COORDINATOR = [
    ["coordinator/core", "coordinator/rendezvous", "coordinator/code", "coordinator/ha"],
    ["coordinator/scheduling", "coordinator/health", "coordinator/store"],
    ["coordinator/jobs"],
    ["coordinator/api"],
    ["coordinator"],
]

# Lowest first. A package not listed is outside the check (tests, bench,
# examples, deploy, docs, the root).
LAYERS = [
    ["third_party"],
    ["proto"],
    ["common", "common/cuda"],
    ["testing"],
    ["domain"],
    ["coordinator", "worker", "worker/testing", "trainer", "trainer/cuda", "client"]
    + [p for layer in COORDINATOR for p in layer],
]
# Packages of one layer that may depend on each other: a program and its
# own subfolders.
FAMILIES = [
    {"common", "common/cuda"},
    {"worker", "worker/testing"},
    {"trainer", "trainer/cuda"},
]


def layer_of(package):
    for i, layer in enumerate(LAYERS):
        if package in layer:
            return i
    return None


def coordinator_layer_of(package):
    for i, layer in enumerate(COORDINATOR):
        if package in layer:
            return i
    return None


def same_family(a, b):
    return any(a in f and b in f for f in FAMILIES)


def package(label):
    m = re.match(r'^"?//([^:"]*):', label)
    return m.group(1) if m else None


def edges(graph_text):
    for line in graph_text.splitlines():
        m = re.match(r'^\s*"([^"]+)"\s*->\s*"([^"]+)"', line)
        if m:
            yield m.group(1), m.group(2)


def violations(pairs):
    out = []
    for src, dst in pairs:
        a, b = package(src), package(dst)
        if a is None or b is None or a == b:
            continue
        la, lb = layer_of(a), layer_of(b)
        if la is None or lb is None:
            continue
        ca, cb = coordinator_layer_of(a), coordinator_layer_of(b)
        if ca is not None and cb is not None:
            wrong = cb >= ca
        else:
            wrong = lb > la or (lb == la and not same_family(a, b))
        if wrong:
            out.append(f"{src} -> {dst} ({a} may not depend on {b})")
    return sorted(set(out))


def main():
    pairs = list(edges(sys.stdin.read()))
    if not pairs:
        print("no dependency graph on standard input (did bazel query fail?)", file=sys.stderr)
        return 2
    found = violations(pairs)
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} arrows against the package order (tests/package_order.py)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
