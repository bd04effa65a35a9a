#!/usr/bin/env python3
"""Prints "tests: N passed, N failed, N skipped" from the XML Bazel wrote
for the test cases of the targets given (those a run tested), under
$TESTLOGS (default bazel-testlogs). A target without a readable result
counts as a failure.

    python3 tests/test_summary.py //tests:cluster_test //worker:nvml_test ...
"""
import os
import sys
import xml.etree.ElementTree as ET


def main(targets):
    passed = failed = skipped = 0
    logs = os.environ.get("TESTLOGS", "bazel-testlogs")
    for target in targets:
        package, name = target.lstrip("/").split(":")
        try:
            root = ET.parse(os.path.join(logs, package, name, "test.xml")).getroot()
        except (OSError, ET.ParseError):
            failed += 1
            continue
        for case in root.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
            elif case.get("result") == "skipped" or case.find("skipped") is not None:
                skipped += 1
            else:
                passed += 1
    print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")


if __name__ == "__main__":
    main(sys.argv[1:])
