#!/bin/sh
# Runs the docs check's test with Debian's Python from the test's runfiles.
exec /usr/bin/python3 tests/docs_check_test.py "$@"
