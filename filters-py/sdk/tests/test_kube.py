"""The SDK's Kubernetes knowledge that servicetopology stands on: endpoint shapes and their
nodes, the topology annotation, a Service's name and a pool's members, as the Rust SDK's
`kube` module tests them."""

import unittest

from edgegate_filter import Context, Filter, Manifest, Object, Replace, Resource, Verb
from edgegate_filter.kube import NODES, SERVICES
from edgegate_filter.kube.endpoints import EndpointsKind
from edgegate_filter.kube.pool import NODE_POOL_LABEL, NODE_POOLS, members
from edgegate_filter.kube.service import SERVICE_NAME_LABEL, service_name, service_of
from edgegate_filter.kube.topology import Topology
from edgegate_filter.testing import Harness


def ctx(group, version, resource):
    return Context.of("kube-proxy", Verb.LIST, Resource(group, version, resource))


class EndpointsTest(unittest.TestCase):
    def test_the_kind_comes_from_the_request(self):
        self.assertIs(EndpointsKind.of(ctx("discovery.k8s.io", "v1", "endpointslices")), EndpointsKind.SLICE_V1)
        self.assertIs(EndpointsKind.of(ctx("discovery.k8s.io", "v1beta1", "endpointslices")), EndpointsKind.SLICE_V1BETA1)
        self.assertIs(EndpointsKind.of(ctx("", "v1", "endpoints")), EndpointsKind.ENDPOINTS)
        self.assertIsNone(EndpointsKind.of(ctx("discovery.k8s.io", "v1alpha1", "endpointslices")))
        self.assertIsNone(EndpointsKind.of(ctx("", "v1", "services")))

    def test_each_shape_reads_its_node_where_kubernetes_puts_it(self):
        both = {"nodeName": "a", "topology": {"kubernetes.io/hostname": "b"},
                "deprecatedTopology": {"kubernetes.io/hostname": "c"}}
        self.assertEqual(EndpointsKind.SLICE_V1BETA1.node_of(both), "b")
        self.assertEqual(EndpointsKind.SLICE_V1.node_of(both), "a")
        self.assertEqual(EndpointsKind.ENDPOINTS.node_of(both), "a")
        self.assertEqual(EndpointsKind.SLICE_V1.node_of({"deprecatedTopology": {"kubernetes.io/hostname": "c"}}), "c")
        self.assertEqual(EndpointsKind.SLICE_V1BETA1.node_of({"nodeName": "a"}), "a")
        for unplaced in [{}, {"nodeName": 7}, "a", None, {"topology": "b"}]:
            self.assertIsNone(EndpointsKind.SLICE_V1BETA1.node_of(unplaced), unplaced)

    def test_endpoints_subsets_lose_emptied_lists_and_empty_subsets(self):
        obj = Object.from_value({"subsets": [
            {"addresses": [{"ip": "1", "nodeName": "a"}], "notReadyAddresses": [{"ip": "2", "nodeName": "b"}]},
            {"addresses": [{"ip": "3", "nodeName": "b"}], "ports": [{"port": 80}]},
            "not a subset",
            {"addresses": [{"ip": "4", "nodeName": "a"}]},
        ]})
        self.assertTrue(EndpointsKind.ENDPOINTS.retain_by_node(obj, lambda n: n == "a"))
        self.assertEqual(obj.get("subsets"), [{"addresses": [{"ip": "1", "nodeName": "a"}]},
                                               {"addresses": [{"ip": "4", "nodeName": "a"}]}])
        self.assertFalse(EndpointsKind.ENDPOINTS.retain_by_node(obj, lambda n: n == "a"), "nothing more to remove")

    def test_a_slice_keeps_an_empty_list_and_bad_shapes_change_nothing(self):
        obj = Object.from_value({"endpoints": [{"addresses": ["1"], "nodeName": "b"}]})
        self.assertTrue(EndpointsKind.SLICE_V1.retain_by_node(obj, lambda n: n == "a"))
        self.assertEqual(obj.get("endpoints"), [])
        for value in [{"endpoints": "x"}, {"subsets": {"a": 1}}, {}]:
            for kind in EndpointsKind:
                unchanged = Object.from_value(dict(value))
                self.assertFalse(kind.retain_by_node(unchanged, lambda n: False), (kind, value))
                self.assertFalse(unchanged.is_edited())


class TopologyAndServiceTest(unittest.TestCase):
    def test_known_values_and_nothing_else(self):
        self.assertIs(Topology.parse("kubernetes.io/hostname"), Topology.NODE)
        self.assertIs(Topology.parse("openyurt.io/nodepool"), Topology.POOL)
        self.assertIs(Topology.parse(" kubernetes.io/zone "), Topology.POOL)
        for unknown in ["", "hostname", "topology.kubernetes.io/zone", "*"]:
            self.assertIsNone(Topology.parse(unknown), unknown)

    def test_slices_name_their_service_by_label_and_endpoints_by_name(self):
        slice_ = Object.from_value({"metadata": {"name": "web-abcde", "namespace": "default",
                                                 "labels": {SERVICE_NAME_LABEL: "web"}}})
        self.assertEqual(service_name(EndpointsKind.SLICE_V1, slice_), "web")
        self.assertEqual(service_name(EndpointsKind.ENDPOINTS, slice_), "web-abcde")
        unlabelled = Object.from_value({"metadata": {"name": "x", "labels": {SERVICE_NAME_LABEL: ""}}})
        self.assertIsNone(service_name(EndpointsKind.SLICE_V1BETA1, unlabelled))


class Lookup(Filter):
    """Runs a lookup inside the harness, where the fake host serves it."""

    @classmethod
    def manifest(cls):
        return Manifest("lookup", "0.1.0")

    def filter(self, ctx, obj):
        if obj.kind == "pool":
            found = members(obj.name)
            return Replace.of({"found": None if found is None else sorted(found)})
        service = service_of(EndpointsKind.SLICE_V1, obj)
        return Replace.of({"found": None if service is None else service.value})


class LookupsTest(unittest.TestCase):
    def lookup(self, made, obj):
        return made.filter(ctx("", "v1", "x"), obj).json()["found"]

    def test_pool_members_from_the_nodepool_then_from_labels(self):
        made = Harness(Lookup, {})
        made.add_object(NODE_POOLS, {"metadata": {"name": "hangzhou"}, "status": {"nodes": ["n1", "n2"]}})
        made.add_object(NODE_POOLS, {"metadata": {"name": "shanghai"}, "status": {"nodes": []}})
        for name, pool in [("n3", "hangzhou"), ("n4", "shanghai"), ("n5", "shanghai")]:
            made.add_object(NODES, {"metadata": {"name": name, "labels": {NODE_POOL_LABEL: pool}}})
        pool = lambda name: {"kind": "pool", "metadata": {"name": name}}
        self.assertEqual(self.lookup(made, pool("hangzhou")), ["n1", "n2"], "the NodePool wins")
        self.assertEqual(self.lookup(made, pool("shanghai")), ["n4", "n5"])
        self.assertIsNone(self.lookup(made, pool("beijing")), "unknown, not empty")
        # A name that is no label value makes no selector (the fake host would refuse it).
        self.assertIsNone(self.lookup(made, pool("a,b=c")))

    def test_the_service_is_looked_up_in_the_slices_namespace(self):
        made = Harness(Lookup, {})
        made.add_object(SERVICES, {"metadata": {"name": "web", "namespace": "prod"}})
        slice_ = lambda ns, svc: {"metadata": {"name": "s", "namespace": ns, "labels": {SERVICE_NAME_LABEL: svc}}}
        self.assertEqual(self.lookup(made, slice_("prod", "web"))["metadata"]["name"], "web")
        self.assertIsNone(self.lookup(made, slice_("prod", "db")))
        self.assertIsNone(self.lookup(made, slice_("staging", "web")))


if __name__ == "__main__":
    unittest.main()
