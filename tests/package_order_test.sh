#!/bin/sh
# Runs the package order check's test with Debian's Python.
exec /usr/bin/python3 tests/package_order_test.py "$@"
