"""YurtHub's masterservice cases on kube-apiserver's JSON, as filters/masterservice's Rust
tests have them: only `default/kubernetes`, only its `https` port, and nothing re-encoded when
nothing changes."""

import copy
import json
import pathlib
import unittest

from edgegate_filter import KEEP, Context, Replace, Verb
from edgegate_filter.kube import SERVICES, HubAddress
from edgegate_filter.testing import Harness, list_item
from masterservice import MasterService

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "filters/masterservice/fixtures"
SERVICE_LIST = (FIXTURES / "services.json").read_text()


def service(namespace, name):
    return list_item(SERVICE_LIST, namespace, name)


def ctx():
    return Context.of("kubelet", Verb.WATCH, SERVICES, node_name="edge-1")


class MasterServiceTest(unittest.TestCase):
    def test_the_kubernetes_service_points_at_the_default_hub(self):
        harness = Harness(MasterService, {})
        before = service("default", "kubernetes")
        after = harness.filter(ctx(), before).json()
        self.assertEqual(after["spec"]["clusterIP"], "169.254.2.1")
        self.assertEqual(after["spec"]["clusterIPs"], ["169.254.2.1"])
        self.assertEqual(
            after["spec"]["ports"],
            [{"name": "https", "protocol": "TCP", "port": 10268, "targetPort": 6443}],
        )
        # Nothing else moved, resourceVersion least of all.
        for field in ["clusterIP", "clusterIPs", "ports"]:
            after["spec"][field] = before["spec"][field]
        self.assertEqual(after, before)
        self.assertEqual(harness.counters["rewritten"], 1)

    def test_the_configured_hub_is_used(self):
        harness = Harness(MasterService, {"host": "10.0.0.254", "port": 20443})
        after = harness.filter(ctx(), service("default", "kubernetes")).json()
        self.assertEqual(after["spec"]["clusterIPs"], ["10.0.0.254"])
        self.assertEqual(after["spec"]["ports"][0]["port"], 20443)

    def test_only_the_https_port_changes(self):
        harness = Harness(MasterService, {})
        before = service("default", "kubernetes")
        before["spec"]["ports"] = [
            {"name": "metrics", "protocol": "TCP", "port": 8443, "targetPort": 8443},
            {"name": "https", "protocol": "TCP", "port": 443, "targetPort": 6443},
        ]
        after = harness.filter(ctx(), before).json()
        self.assertEqual(after["spec"]["ports"][0], before["spec"]["ports"][0])
        self.assertEqual(after["spec"]["ports"][1]["port"], 10268)

    def test_other_services_are_kept_even_when_alike(self):
        harness = Harness(MasterService, {})
        elsewhere = service("default", "kubernetes")
        elsewhere["metadata"]["namespace"] = "kube-system"
        for other in [
            service("kube-system", "metrics-server"),
            service("kube-system", "kube-dns"),
            elsewhere,
        ]:
            self.assertEqual(harness.filter(ctx(), other), KEEP)
        self.assertFalse(harness.counters)

    def test_an_already_rewritten_service_is_kept_without_re_encoding(self):
        harness = Harness(MasterService, {})
        rewritten = harness.filter(ctx(), service("default", "kubernetes")).json()
        self.assertEqual(harness.filter(ctx(), rewritten), KEEP)
        # A partial rewrite (clusterIPs still the cloud's) is completed.
        partial = copy.deepcopy(rewritten)
        partial["spec"]["clusterIPs"] = ["10.96.0.1"]
        output = harness.filter(ctx(), partial)
        self.assertIsInstance(output, Replace)
        self.assertEqual(output.json(), rewritten)

    def test_bad_configs_are_refused_and_the_schema_is_declared(self):
        for bad in [{"host": "hub"}, {"port": 0}, {"tls": True}]:
            with self.assertRaises(ValueError):
                Harness(MasterService, bad)
        manifest = MasterService.manifest()
        self.assertEqual(manifest.components, ["kubelet"])
        self.assertEqual(manifest.matches[0].resources, ["services"])
        self.assertEqual(manifest.matches[0].verbs, [Verb.LIST, Verb.WATCH])
        self.assertEqual(json.loads(manifest.schema_text()), HubAddress.schema())


if __name__ == "__main__":
    unittest.main()
