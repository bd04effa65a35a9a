#!/bin/sh
# Runs the HTTP API suite with Debian's Python from the test's runfiles.
exec /usr/bin/python3 tests/http_api_test.py "$@"
