"""YurtHub's servicetopology cases on kube-apiserver's JSON, plus v1 Endpoints, as
filters/servicetopology's Rust tests have them, on the same fixtures."""

import copy
import json
import pathlib
import unittest

from edgegate_filter import KEEP, Context, Level, Replace, Resource, Verb
from edgegate_filter.kube import NODES, SERVICES
from edgegate_filter.kube.pool import NODE_POOLS
from edgegate_filter.testing import Harness
from servicetopology import ServiceTopology

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "filters/servicetopology/fixtures"


def items(name):
    return json.loads((FIXTURES / name).read_text())["items"]


# The addresses in the fixtures, by node: edge-1 and edge-2 are in pool hangzhou, edge-3 in
# shanghai; 192.168.7.20 has no node.
ON_EDGE_1 = sorted(["10.244.1.2", "10.244.1.4"])
IN_HANGZHOU = sorted(["10.244.1.2", "10.244.2.3", "10.244.1.4"])
ALL = sorted(["10.244.1.2", "10.244.2.3", "10.244.1.4", "10.244.3.5", "192.168.7.20"])


class Shape:
    """One of the three shapes of endpoints the filter serves."""

    def __init__(self, name, group, version, resource, fixture):
        self.name, self.resource, self.fixture = name, Resource(group, version, resource), fixture
        self.key = "subsets" if resource == "endpoints" else "endpoints"

    def __repr__(self):
        return self.name

    def ctx(self, pool=None, node="edge-1"):
        """A kube-proxy watch of this shape on `node` in `pool`."""
        return Context.of("kube-proxy", Verb.WATCH, self.resource, node_name=node, node_pool=pool)

    def object_of(self, service):
        """The fixture object, made to belong to `service` (None: to no Service)."""
        obj = items(self.fixture)[0]
        labels = obj["metadata"].setdefault("labels", {})
        if self.key == "subsets":
            obj["metadata"]["name"] = service
        elif service is None:
            labels.pop("kubernetes.io/service-name")
        else:
            labels["kubernetes.io/service-name"] = service
        return obj

    def addresses(self, obj):
        """The addresses of an object's endpoints, sorted (ready and not ready)."""
        if self.key == "endpoints":
            return sorted(a for e in obj["endpoints"] for a in e["addresses"])
        return sorted(
            address["ip"]
            for subset in obj["subsets"]
            for key in ("addresses", "notReadyAddresses")
            for address in subset.get(key, [])
        )


V1BETA1 = Shape("v1beta1", "discovery.k8s.io", "v1beta1", "endpointslices", "endpointslices.v1beta1.json")
V1 = Shape("v1", "discovery.k8s.io", "v1", "endpointslices", "endpointslices.v1.json")
ENDPOINTS = Shape("endpoints", "", "v1", "endpoints", "endpoints.json")
SHAPES = [V1BETA1, V1, ENDPOINTS]


def harness(pools=True, nodes=True):
    """The filter, with the fixtures' Services known (and, if asked, its pools and nodes)."""
    made = Harness(ServiceTopology, {})
    for service in items("services.json"):
        made.add_object(SERVICES, service)
    for pool in items("nodepools.json") if pools else []:
        made.add_object(NODE_POOLS, pool)
    for node in items("nodes.json") if nodes else []:
        made.add_object(NODES, node)
    return made


class ServiceTopologyTest(unittest.TestCase):
    def kept(self, made, shape, service, pool):
        """The addresses sent on for the fixture of `shape` for `service`, on edge-1 in
        `pool`; checks that nothing but the endpoints changed."""
        obj = shape.object_of(service)
        output = made.filter(shape.ctx(pool), obj)
        if output == KEEP:
            return shape.addresses(obj)
        self.assertIsInstance(output, Replace, f"{shape} {service}: never dropped")
        out = output.json()
        self.assertEqual({**out, shape.key: None}, {**obj, shape.key: None}, shape)
        return shape.addresses(out)

    def test_hostname_topology_keeps_this_nodes_endpoints(self):
        made = harness()
        for shape in SHAPES:
            for pool in ["hangzhou", None]:
                self.assertEqual(self.kept(made, shape, "web-node", pool), ON_EDGE_1, (shape, pool))
        self.assertEqual(made.counters["pruned"], 6)

    def test_a_prune_is_logged_at_debug_only_when_the_log_shows_debug(self):
        made = harness()

        def debug_lines():
            return sum(1 for level, line in made.logs if level == Level.DEBUG and line.startswith("pruned"))

        self.kept(made, V1BETA1, "web-node", None)
        self.assertEqual(debug_lines(), 1)
        made.log_level = Level.INFO
        self.kept(made, V1BETA1, "web-node", None)
        self.assertEqual(debug_lines(), 1, "not written, as the host does not show it")
        self.assertEqual(made.counters["pruned"], 2, "counted all the same")

    def test_pool_and_zone_topology_keep_the_pools_endpoints(self):
        made = harness(nodes=False)
        for shape in SHAPES:
            for service in ["web-pool", "web-zone"]:
                self.assertEqual(self.kept(made, shape, service, "hangzhou"), IN_HANGZHOU, (shape, service))

    def test_pool_members_come_from_labelled_nodes_without_a_nodepool(self):
        made = harness(pools=False)
        for shape in SHAPES:
            self.assertEqual(self.kept(made, shape, "web-pool", "hangzhou"), IN_HANGZHOU, shape)

    def test_a_node_in_no_pool_falls_back_to_the_hostname_rule(self):
        made = harness()
        for shape in SHAPES:
            for pool in [None, ""]:
                self.assertEqual(self.kept(made, shape, "web-pool", pool), ON_EDGE_1, (shape, pool))

    def test_this_node_counts_as_a_member_before_the_nodepool_lists_it(self):
        made = harness(pools=False, nodes=False)
        made.add_object(NODE_POOLS, {"metadata": {"name": "hangzhou"}, "status": {"nodes": ["edge-2"]}})
        self.assertEqual(self.kept(made, V1, "web-pool", "hangzhou"), IN_HANGZHOU)

    def test_an_unknown_pool_leaves_the_endpoints_alone(self):
        made = harness(pools=False, nodes=False)
        for shape in SHAPES:
            self.assertEqual(made.filter(shape.ctx("hangzhou"), shape.object_of("web-pool")), KEEP, shape)
        self.assertEqual(made.counters["pool-unknown"], 3)
        self.assertEqual(sum(1 for level, _ in made.logs if level == Level.WARN), 3, "one per call")

    def test_no_endpoints_left_still_sends_the_object_empty(self):
        made = harness()
        # edge-9 has no endpoints, and neither has its pool, beijing.
        made.add_object(NODES, {"metadata": {"name": "edge-9", "labels": {"apps.openyurt.io/nodepool": "beijing"}}})
        for shape in SHAPES:
            obj = shape.object_of("web-pool")
            for pool in ["beijing", None]:
                out = made.filter(shape.ctx(pool, node="edge-9"), obj).json()
                self.assertEqual(out[shape.key], [], shape)
                self.assertEqual(out["metadata"], obj["metadata"])

    def test_services_without_a_known_topology_keep_their_endpoints(self):
        made = harness()
        made.add_object(SERVICES, {"metadata": {"name": "web-region", "namespace": "default",
                                                "annotations": {"openyurt.io/topologyKeys": "topology.kubernetes.io/region"}}})
        for shape in SHAPES:
            for service in ["web-plain", "web-region", "web-missing"]:
                self.assertEqual(made.filter(shape.ctx("hangzhou"), shape.object_of(service)), KEEP, (shape, service))
        for shape in [V1BETA1, V1]:
            self.assertEqual(made.filter(shape.ctx(), shape.object_of(None)), KEEP, shape)
        self.assertFalse(made.counters)

    def test_endpoints_without_a_node_are_never_kept(self):
        made = harness()
        for shape in SHAPES:
            self.assertNotIn("192.168.7.20", self.kept(made, shape, "web-pool", "hangzhou"), shape)

    def test_v1beta1_endpoints_fall_back_to_their_node_name(self):
        slice_ = V1BETA1.object_of("web-node")
        for endpoint in slice_["endpoints"]:
            topology = endpoint.get("topology")
            if isinstance(topology, dict):
                endpoint["nodeName"] = topology.pop("kubernetes.io/hostname")
        out = harness().filter(V1BETA1.ctx(), slice_).json()
        self.assertEqual(V1BETA1.addresses(out), ON_EDGE_1)

    def test_objects_whose_endpoints_all_stay_are_kept_as_they_are(self):
        made = harness()
        for shape in SHAPES:
            pruned = made.filter(shape.ctx(), shape.object_of("web-node")).json()
            # Only edge-1's endpoints are left: nothing to remove, so nothing is re-encoded.
            self.assertEqual(made.filter(shape.ctx(), pruned), KEEP, shape)

    def test_other_versions_and_resources_are_kept(self):
        made = harness()
        slice_ = V1.object_of("web-node")
        for resource in [Resource("discovery.k8s.io", "v1alpha1", "endpointslices"), Resource("", "v1", "pods")]:
            self.assertEqual(made.filter(Context.of("kube-proxy", Verb.LIST, resource, node_name="edge-1"), slice_), KEEP)

    def test_a_batch_decides_each_slice_of_a_list(self):
        made = harness()
        batch = [V1.object_of(s) for s in ["web-node", "web-plain", "web-pool", "web-missing"]]
        before = copy.deepcopy(batch)
        outs = made.filter_batch(V1.ctx("hangzhou"), batch)
        self.assertEqual(V1.addresses(outs[0].json()), ON_EDGE_1)
        self.assertEqual(outs[1], KEEP)
        self.assertEqual(V1.addresses(outs[2].json()), IN_HANGZHOU)
        self.assertEqual(outs[3], KEEP)
        self.assertEqual(batch, before)
        self.assertEqual(V1.addresses(batch[1]), ALL)

    def test_the_manifest_covers_slices_and_endpoints_for_the_proxies(self):
        manifest = ServiceTopology.manifest()
        self.assertEqual(manifest.name, "servicetopology")
        self.assertEqual(manifest.components, ["kube-proxy", "coredns", "nginx-ingress-controller"])
        resources = [(m.group, r) for m in manifest.matches for r in m.resources]
        self.assertEqual(resources, [("discovery.k8s.io", "endpointslices"), ("", "endpoints")])
        self.assertTrue(all(m.verbs == [Verb.LIST, Verb.WATCH] for m in manifest.matches))


if __name__ == "__main__":
    unittest.main()
