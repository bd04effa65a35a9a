#!/usr/bin/env python3
"""docs_check on the repository's own docs finds nothing; on a copy with a
made-up flag, metric, environment variable, spec fields, method and
function it names each, and a default stated apart in two docs too."""
import os
import secrets
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docs_check  # noqa: E402

# The runfiles hold the docs as links into the source tree: the rest of
# the tree (the code the names must be in) is found beside them.
ROOT = os.path.dirname(os.path.realpath("README.md"))
BIN = os.getcwd()


class DocsCheckTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.code = docs_check.code_text(ROOT)
        cls.help = docs_check.help_text(BIN)

    def test_every_name_in_the_docs_exists(self):
        problems = docs_check.check(ROOT, self.help, self.code)
        self.assertEqual(problems, [], "\n" + "\n".join(problems))

    def test_a_made_up_name_of_each_kind_is_reported(self):
        # Random, so that no file of the tree (this one included) holds them.
        word = "x" + secrets.token_hex(4)
        made_up = {
            "flag": f"--no-such-{word}",
            "metric": f"ringmaster_{word}_total",
            "env": f"RINGMASTER_{word.upper()}",
            "field": f"{word}_field",
            "nested": f"{word}_knob",
            "method": f"JobManager::Resubmit{word}",
            "function": f"reschedule_{word}()",
        }
        with tempfile.TemporaryDirectory() as tree:
            for part in ("docs", "proto", "deploy", "examples"):
                shutil.copytree(os.path.join(ROOT, part), os.path.join(tree, part))
            shutil.copy(os.path.join(ROOT, "README.md"), tree)
            with open(os.path.join(tree, "docs", "reference.md"), "a") as f:
                f.write(f"\nUse `{made_up['flag']}`, watch `{made_up['metric']}`, "
                        f"set `{made_up['env']}`, call `{made_up['method']}` and "
                        f"`{made_up['function']}`.\n\n```yaml\nname: x\nranks: 2\n"
                        f"{made_up['field']}: 1\ntrainer:\n  optimizer: "
                        f"{{{made_up['nested']}: 2}}\n```\n")
            problems = docs_check.check(tree, self.help, self.code)
        report = "\n".join(problems)
        self.assertEqual(len(problems), 7, report)
        for name in made_up.values():
            self.assertIn(name, report)
        self.assertIn("trainer.optimizer." + made_up["nested"] + ": Optimizer has no such field",
                      report)
        self.assertIn(f"no Resubmit{word} in the sources of JobManager", report)

    def test_a_default_stated_apart_in_two_docs_is_reported(self):
        with tempfile.TemporaryDirectory() as tree:
            for part in ("docs", "proto", "deploy", "examples"):
                shutil.copytree(os.path.join(ROOT, part), os.path.join(tree, part))
            shutil.copy(os.path.join(ROOT, "README.md"), tree)
            # operations.md's table says 1m; 60s elsewhere is the same.
            with open(os.path.join(tree, "docs", "health.md"), "a") as f:
                f.write("\nA straggler is named after `--straggler-for` (60s).\n")
            self.assertEqual(docs_check.check(tree, self.help, self.code), [])
            with open(os.path.join(tree, "docs", "health.md"), "a") as f:
                f.write("\nA straggler is named after 90s (`--straggler-for`).\n")
            problems = docs_check.check(tree, self.help, self.code)
        self.assertEqual(len(problems), 1, "\n".join(problems))
        self.assertRegex(problems[0], r"--straggler-for: its default is stated as (60 here and "
                                      r"90 at docs/health.md|90 here and 60 at docs/operations.md)")

if __name__ == "__main__":
    unittest.main()
