#!/bin/sh
# Runs the topology suite with Debian's Python from the test's runfiles.
exec /usr/bin/python3 tests/topology_test.py "$@"
