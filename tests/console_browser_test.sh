#!/bin/sh
# Runs the console's browser test with Debian's Python from the test's runfiles.
exec /usr/bin/python3 tests/console_browser_test.py "$@"
