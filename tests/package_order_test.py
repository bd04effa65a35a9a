"""tests/package_order.py on graphs made up for it."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from package_order import edges, violations  # noqa: E402


def graph(*arrows):
    return "digraph mygraph {\n" + "".join(f'  "{a}" -> "{b}"\n' for a, b in arrows) + "}\n"


class PackageOrderTest(unittest.TestCase):
    def test_downward_arrows_pass(self):
        self.assertEqual(violations(edges(graph(
            ("//trainer:trainer_lib", "//domain:lr_schedule"),
            ("//domain:spec_validation", "//common:limits"),
            ("//client:client", "//proto:ringmaster_cc_proto"),
            ("//trainer:main", "//trainer/cuda:gpu_runner"),
            ("//tests:cluster_fixture", "//coordinator:job_manager")))), [])

    def test_an_arrow_up_fails_naming_it(self):
        self.assertEqual(violations(edges(graph(
            ("//domain:job_state", "//coordinator:job_manager")))),
            ["//domain:job_state -> //coordinator:job_manager "
             "(domain may not depend on coordinator)"])

    def test_one_program_into_another_fails(self):
        self.assertEqual(violations(edges(graph(
            ("//client:output", "//trainer:optimizer"),
            ("//worker:stack_capture", "//trainer:flight_recorder")))), [
            "//client:output -> //trainer:optimizer (client may not depend on trainer)",
            "//worker:stack_capture -> //trainer:flight_recorder "
            "(worker may not depend on trainer)"])

    def test_coordinator_packages_depend_downward_only(self):
        self.assertEqual(violations(edges(graph(
            ("//coordinator/jobs:job_manager", "//coordinator/scheduling:queue_scheduler"),
            ("//coordinator/scheduling:scheduling_views", "//coordinator/core:job_table"),
            ("//coordinator/store:pg_job_store", "//coordinator/core:job_store"),
            ("//coordinator/api:coordinator_server", "//coordinator/store:store_factory"),
            ("//coordinator:ringmaster-coordinator", "//coordinator/api:coordinator_server"),
            ("//coordinator/core:job_table", "//domain:job_state")))), [])

    def test_a_coordinator_back_arrow_fails(self):
        self.assertEqual(violations(edges(graph(
            ("//coordinator/core:job_table", "//coordinator/jobs:job_manager"),
            ("//coordinator/scheduling:queue_scheduler", "//coordinator/health:worker_health"),
            ("//coordinator/api:services", "//coordinator:ringmaster-coordinator")))), [
            "//coordinator/api:services -> //coordinator:ringmaster-coordinator "
            "(coordinator/api may not depend on coordinator)",
            "//coordinator/core:job_table -> //coordinator/jobs:job_manager "
            "(coordinator/core may not depend on coordinator/jobs)",
            "//coordinator/scheduling:queue_scheduler -> //coordinator/health:worker_health "
            "(coordinator/scheduling may not depend on coordinator/health)"])

    def test_a_coordinator_package_stays_out_of_other_programs(self):
        self.assertEqual(violations(edges(graph(
            ("//coordinator/jobs:job_manager", "//worker:agent"),
            ("//trainer:main", "//coordinator/core:job_table")))), [
            "//coordinator/jobs:job_manager -> //worker:agent "
            "(coordinator/jobs may not depend on worker)",
            "//trainer:main -> //coordinator/core:job_table "
            "(trainer may not depend on coordinator/core)"])

    def test_packages_outside_the_order_are_not_checked(self):
        self.assertEqual(violations(edges(graph(
            ("//bench:coordinator_scale", "//coordinator:job_manager"),
            ("//:package", "//client:ringmaster")))), [])


if __name__ == "__main__":
    unittest.main()
