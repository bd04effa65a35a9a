#!/bin/sh
# Runs the spares suite with Debian's Python from the test's runfiles.
exec /usr/bin/python3 tests/spares_test.py "$@"
