#!/bin/sh
# Runs the partition case of high availability with Debian's Python.
exec /usr/bin/python3 tests/ha_partition_test.py "$@"
