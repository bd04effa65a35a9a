#!/bin/sh
# Runs docs/high-availability.md's PostgreSQL set-up with Debian's Python.
exec /usr/bin/python3 tests/postgres_setup_test.py "$@"
