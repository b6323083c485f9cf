"""The SDK's own cases: paths, edits counted as the Rust SDK counts them, decisions, the hub
address config, the fake host."""

import unittest

from edgegate_filter import DROP, KEEP, Context, Filter, Level, Manifest, Object, Replace, Verb, host
from edgegate_filter.kube import SERVICES, HubAddress, comma_list, flag, is_label_value
from edgegate_filter.object import ObjectError
from edgegate_filter.testing import Harness

RAW = (
    b'{"kind": "Service", "metadata": {"name": "a", "namespace": "n", "resourceVersion": "1",'
    b' "labels": {"app": "web", "n": 1}}, "spec": {"ports": [{"name": "dns", "port": 53},'
    b' {"name": "https", "port": 443}], "type": "ClusterIP"}}'
)


class ObjectTest(unittest.TestCase):
    def test_reads(self):
        obj = Object(RAW)
        self.assertEqual((obj.kind, obj.namespace, obj.name), ("Service", "n", "a"))
        self.assertEqual(obj.resource_version, "1")
        self.assertTrue(obj.is_named("n", "a"))
        self.assertEqual(obj.label("app"), "web")
        self.assertIsNone(obj.label("n"), "not a string")
        self.assertEqual(obj.labels(), {"app": "web"})
        self.assertEqual(obj.annotations(), {})
        self.assertEqual(obj.spec("ports.1.port"), 443)
        self.assertEqual(obj.get("spec.ports.1.name"), "https")
        self.assertIsNone(obj.get("spec.ports.2.name"))
        self.assertIsNone(obj.get("spec.type.x"))
        self.assertEqual(obj.position("spec.ports", lambda p: p["name"] == "https"), 1)
        self.assertIsNone(obj.position("spec.type", lambda p: True))
        self.assertFalse(obj.is_edited())
        self.assertEqual(obj.to_bytes(), RAW)

    def test_is_named_reads_escapes(self):
        self.assertTrue(Object(rb'{"metadata": {"namespace": "n", "name": "kube\u0072netes"}}').is_named("n", "kubernetes"))
        self.assertTrue(Object(rb'{"metadata": {"namespace": "n", "name": "a\/b"}}').is_named("n", "a/b"))
        self.assertFalse(Object(rb'{"metadata": {"namespace": "n", "name": "kubernetes2"}}').is_named("n", "kubernetes"))
        self.assertFalse(Object(rb'{"metadata": {"namespace": "kubernetes", "name": "n"}}').is_named("n", "kubernetes"))

    def test_not_objects_are_refused(self):
        for bad in [b"[1]", b"nope", b"", b'"s"']:
            with self.assertRaises(ObjectError):
                Object(bad)

    def test_update_edits_only_when_the_value_differs(self):
        obj = Object(RAW)
        self.assertFalse(obj.update("spec.ports.1.port", 443))
        self.assertFalse(obj.is_edited())
        # 443.0 and true are other JSON values than 443.
        self.assertTrue(obj.update("spec.ports.1.port", 443.0))
        self.assertTrue(obj.is_edited())
        obj = Object(RAW)
        obj.set_label("app", "web")
        self.assertFalse(obj.is_edited())
        self.assertIsNone(obj.remove("spec.none"))
        self.assertIsNone(obj.remove_annotation("none"))
        self.assertFalse(obj.is_edited())

    def test_set_creates_objects_but_never_array_items(self):
        obj = Object(RAW)
        self.assertFalse(obj.set("spec.ports.2.port", 1))
        self.assertFalse(obj.set("spec.type.x", 1))
        self.assertFalse(obj.set("spec.ports.x", 1))
        self.assertFalse(obj.is_edited())
        self.assertTrue(obj.set("status.loadBalancer.ingress", []))
        self.assertEqual(obj.status("loadBalancer"), {"ingress": []})
        self.assertTrue(obj.is_edited())

    def test_labels_and_annotations_are_made_where_null(self):
        obj = Object(b'{"metadata": {"name": "a", "labels": null}}')
        obj.set_label("k", "v")
        obj.set_annotation("a", "b")
        self.assertEqual(obj.value["metadata"], {"name": "a", "labels": {"k": "v"}, "annotations": {"a": "b"}})
        self.assertEqual(obj.remove_label("k"), "v")

    def test_mut_accessors_count_as_edits_but_forward_nothing_unchanged(self):
        obj = Object(RAW)
        obj.spec_mut("ports")
        self.assertTrue(obj.is_edited())
        self.assertIsNone(obj.edits())
        obj.get_mut("spec.ports").pop()
        self.assertEqual(Object(obj.edits()).spec("ports"), [{"name": "dns", "port": 53}])

    def test_retain_items(self):
        obj = Object(b'{"metadata": {}, "endpoints": [{"n": 1}, {"n": 2}]}')
        self.assertFalse(obj.retain_items("endpoints", lambda item: True))
        self.assertFalse(obj.retain_items("none", lambda item: False))
        self.assertFalse(obj.is_edited())
        self.assertTrue(obj.retain_items("endpoints", lambda item: item["n"] == 2))
        self.assertEqual(obj.get("endpoints"), [{"n": 2}])

    def test_non_ascii_is_written_as_utf8(self):
        obj = Object('{"metadata": {"name": "é"}}'.encode())
        obj.set_label("k", "ü")
        self.assertIn("ü".encode(), obj.edits())


class Stamp(Filter):
    def __init__(self, annotation="example.com/node"):
        self.annotation = annotation

    @classmethod
    def manifest(cls):
        return Manifest("stamp", "0.1.0")

    def filter(self, ctx, obj):
        if flag(obj, "example.com/drop"):
            return DROP
        if obj.name == "replace":
            return Replace.of({"metadata": {"name": "replace"}})
        service = host.get(SERVICES, obj.namespace, "web")
        if service is not None:
            host.count("found", 2)
        if host.log_enabled(Level.DEBUG):
            host.log(Level.DEBUG, f"stamping {obj.name}")
        obj.set_annotation(self.annotation, ctx.node_name)
        return KEEP


class HarnessTest(unittest.TestCase):
    def test_decisions_lookups_counters_and_logs(self):
        harness = Harness(Stamp, {"annotation": "a"})
        harness.add_object(SERVICES, {"metadata": {"namespace": "n", "name": "web", "labels": {"x": "y"}}})
        ctx = Context.of("kubelet", Verb.LIST, SERVICES, node_name="edge-1")
        outputs = harness.filter_batch(
            ctx,
            [
                {"metadata": {"name": "d", "annotations": {"example.com/drop": "true"}}},
                {"metadata": {"name": "replace"}},
                {"metadata": {"name": "s", "namespace": "n", "annotations": {"a": "edge-1"}}},
                {"metadata": {"name": "t", "namespace": "n"}},
            ],
        )
        self.assertEqual(outputs[:3], [DROP, Replace(b'{"metadata":{"name":"replace"}}'), KEEP])
        self.assertEqual(outputs[3].json()["metadata"]["annotations"], {"a": "edge-1"})
        self.assertEqual(harness.counters["found"], 4)
        self.assertEqual(harness.logs[0], (Level.DEBUG, "stamping s"))
        self.assertEqual(len(list_objects(harness, "x=y")), 1)
        self.assertEqual(len(list_objects(harness, "x!=y")), 0)
        self.assertEqual(len(list_objects(harness, "x in (a, y),!z")), 1)

    def test_a_config_the_constructor_refuses_is_refused(self):
        with self.assertRaisesRegex(ValueError, "bad config"):
            Harness(Stamp, {"annotaton": "a"})


def list_objects(harness, selector):
    with harness._installed():
        return host.list(SERVICES, "n", selector)


class KubeTest(unittest.TestCase):
    def test_hub_address(self):
        hub = HubAddress.from_config({})
        self.assertEqual((hub.host, hub.port, hub.address_type), ("169.254.2.1", 10268, "IPv4"))
        hub = HubAddress.from_config({"host": "fd00::2", "port": 443})
        self.assertEqual((hub.host, hub.address_type), ("fd00::2", "IPv6"))
        self.assertEqual(HubAddress.from_config({"host": "::ffff:10.0.0.1"}).host, "::ffff:10.0.0.1")
        for bad, why in [
            ({"host": "hub.local"}, "not an IP"),
            ({"host": "fe80::1%eth0"}, "not an IP"),
            ({"port": 0}, "between 1 and 65535"),
            ({"port": 70000}, "bad host/port config"),
            ({"port": True}, "bad host/port config"),
            ({"hots": "10.0.0.1"}, "unknown field"),
        ]:
            with self.assertRaisesRegex(ValueError, why):
                HubAddress.from_config(bad)

    def test_set_named_port(self):
        hub = HubAddress()
        obj = Object(RAW)
        self.assertTrue(hub.set_named_port(obj, "spec.ports", "https"))
        self.assertEqual(obj.spec("ports"), [{"name": "dns", "port": 53}, {"name": "https", "port": 10268}])
        self.assertFalse(hub.set_named_port(obj, "spec.ports", "https"), "already set")
        self.assertFalse(hub.set_named_port(obj, "spec.ports", "http"))
        self.assertFalse(hub.set_named_port(obj, "spec.none", "https"))

    def test_annotation_values(self):
        self.assertEqual(list(comma_list(" foo, -bar ,,*, ")), ["foo", "-bar", "*"])
        self.assertTrue(is_label_value("pool-1"))
        for bad in ["", "-a", "a-", "a b", "x" * 64, "é"]:
            self.assertFalse(is_label_value(bad), bad)


if __name__ == "__main__":
    unittest.main()
