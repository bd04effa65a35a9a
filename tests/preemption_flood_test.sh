#!/bin/sh
# Runs the preemption flood test with Debian's Python from the test's runfiles.
exec /usr/bin/python3 tests/preemption_flood_test.py "$@"
