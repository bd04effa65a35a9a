#!/bin/sh
# Runs the quickstart walkthrough's test with Debian's Python from the
# test's runfiles.
exec /usr/bin/python3 tests/quickstart_cluster_test.py "$@"
