#!/bin/sh
# Runs the chaos suite with Debian's Python from the test's runfiles.
exec /usr/bin/python3 tests/chaos_test.py "$@"
