// The SDK's Kubernetes knowledge that servicetopology stands on: endpoint shapes and their
// nodes, the topology annotation, a Service's name and a pool's members, as the Rust SDK's
// `kube` module (and filters-py's port) tests them. Run with `node --test`.

import assert from 'node:assert/strict';
import { describe as suite, test } from 'node:test';

import { Context, Filter, KubeObject, Manifest, Replace, Resource, Verb } from '../edgegate-filter/index.js';
import { EndpointsKind } from '../edgegate-filter/endpoints.js';
import { NODES, SERVICES } from '../edgegate-filter/kube.js';
import { NODE_POOLS, NODE_POOL_LABEL, members } from '../edgegate-filter/pool.js';
import { SERVICE_NAME_LABEL, serviceName, serviceOf } from '../edgegate-filter/service.js';
import { Topology } from '../edgegate-filter/topology.js';
import { Harness } from '../edgegate-filter/testing.js';

const ctx = (group, version, resource) => Context.of('kube-proxy', Verb.LIST, new Resource(group, version, resource));
const { SLICE_V1, SLICE_V1BETA1, ENDPOINTS } = EndpointsKind;

suite('endpoints', () => {
  test('the kind comes from the request', () => {
    assert.equal(EndpointsKind.of(ctx('discovery.k8s.io', 'v1', 'endpointslices')), SLICE_V1);
    assert.equal(EndpointsKind.of(ctx('discovery.k8s.io', 'v1beta1', 'endpointslices')), SLICE_V1BETA1);
    assert.equal(EndpointsKind.of(ctx('', 'v1', 'endpoints')), ENDPOINTS);
    assert.equal(EndpointsKind.of(ctx('discovery.k8s.io', 'v1alpha1', 'endpointslices')), undefined);
    assert.equal(EndpointsKind.of(ctx('', 'v1', 'services')), undefined);
  });

  test('each shape reads its node where Kubernetes puts it', () => {
    const both = {
      nodeName: 'a',
      topology: { 'kubernetes.io/hostname': 'b' },
      deprecatedTopology: { 'kubernetes.io/hostname': 'c' },
    };
    assert.equal(SLICE_V1BETA1.nodeOf(both), 'b');
    assert.equal(SLICE_V1.nodeOf(both), 'a');
    assert.equal(ENDPOINTS.nodeOf(both), 'a');
    assert.equal(SLICE_V1.nodeOf({ deprecatedTopology: { 'kubernetes.io/hostname': 'c' } }), 'c');
    assert.equal(SLICE_V1BETA1.nodeOf({ nodeName: 'a' }), 'a');
    for (const unplaced of [{}, { nodeName: 7 }, 'a', null, { topology: 'b' }]) {
      assert.equal(SLICE_V1BETA1.nodeOf(unplaced), undefined, JSON.stringify(unplaced));
    }
  });

  test('Endpoints subsets lose emptied lists and empty subsets', () => {
    const obj = KubeObject.fromValue({
      subsets: [
        { addresses: [{ ip: '1', nodeName: 'a' }], notReadyAddresses: [{ ip: '2', nodeName: 'b' }] },
        { addresses: [{ ip: '3', nodeName: 'b' }], ports: [{ port: 80 }] },
        'not a subset',
        { addresses: [{ ip: '4', nodeName: 'a' }] },
      ],
    });
    assert.ok(ENDPOINTS.retainByNode(obj, (n) => n === 'a'));
    assert.deepEqual(obj.get('subsets'), [
      { addresses: [{ ip: '1', nodeName: 'a' }] },
      { addresses: [{ ip: '4', nodeName: 'a' }] },
    ]);
    assert.ok(!ENDPOINTS.retainByNode(obj, (n) => n === 'a'), 'nothing more to remove');
  });

  test('a slice keeps an empty list and bad shapes change nothing', () => {
    const obj = KubeObject.fromValue({ endpoints: [{ addresses: ['1'], nodeName: 'b' }] });
    assert.ok(SLICE_V1.retainByNode(obj, (n) => n === 'a'));
    assert.deepEqual(obj.get('endpoints'), []);
    for (const value of [{ endpoints: 'x' }, { subsets: { a: 1 } }, {}]) {
      for (const kind of EndpointsKind.all()) {
        const unchanged = KubeObject.fromValue(structuredClone(value));
        assert.ok(!kind.retainByNode(unchanged, () => false), `${kind.apiVersion} ${JSON.stringify(value)}`);
        assert.ok(!unchanged.isEdited());
      }
    }
  });
});

suite('topology and Service', () => {
  test('known values and nothing else', () => {
    assert.equal(Topology.parse('kubernetes.io/hostname'), Topology.NODE);
    assert.equal(Topology.parse('openyurt.io/nodepool'), Topology.POOL);
    assert.equal(Topology.parse(' kubernetes.io/zone '), Topology.POOL);
    for (const unknown of ['', 'hostname', 'topology.kubernetes.io/zone', '*']) {
      assert.equal(Topology.parse(unknown), undefined, unknown);
    }
  });

  test('slices name their Service by label and Endpoints by name', () => {
    const slice = KubeObject.fromValue({
      metadata: { name: 'web-abcde', namespace: 'default', labels: { [SERVICE_NAME_LABEL]: 'web' } },
    });
    assert.equal(serviceName(SLICE_V1, slice), 'web');
    assert.equal(serviceName(ENDPOINTS, slice), 'web-abcde');
    const unlabelled = KubeObject.fromValue({ metadata: { name: 'x', labels: { [SERVICE_NAME_LABEL]: '' } } });
    assert.equal(serviceName(SLICE_V1BETA1, unlabelled), undefined);
  });
});

/** Runs a lookup inside the harness, where the fake host serves it. */
class Lookup extends Filter {
  static manifest() {
    return new Manifest('lookup', '0.1.0');
  }

  filter(ctx, obj) {
    if (obj.kind === 'pool') {
      const found = members(obj.name);
      return Replace.of({ found: found === undefined ? null : [...found].sort() });
    }
    const service = serviceOf(SLICE_V1, obj);
    return Replace.of({ found: service === undefined ? null : service.value });
  }
}

suite('lookups', () => {
  const lookup = (made, obj) => made.filter(ctx('', 'v1', 'x'), obj).json().found;

  test('pool members from the NodePool, then from labels', () => {
    const made = new Harness(Lookup, {});
    made.addObject(NODE_POOLS, { metadata: { name: 'hangzhou' }, status: { nodes: ['n1', 'n2'] } });
    made.addObject(NODE_POOLS, { metadata: { name: 'shanghai' }, status: { nodes: [] } });
    for (const [name, pool] of [['n3', 'hangzhou'], ['n4', 'shanghai'], ['n5', 'shanghai']]) {
      made.addObject(NODES, { metadata: { name, labels: { [NODE_POOL_LABEL]: pool } } });
    }
    const pool = (name) => ({ kind: 'pool', metadata: { name } });
    assert.deepEqual(lookup(made, pool('hangzhou')), ['n1', 'n2'], 'the NodePool wins');
    assert.deepEqual(lookup(made, pool('shanghai')), ['n4', 'n5']);
    assert.equal(lookup(made, pool('beijing')), null, 'unknown, not empty');
    // A name that is no label value makes no selector (the fake host would refuse it).
    assert.equal(lookup(made, pool('a,b=c')), null);
  });

  test("the Service is looked up in the slice's namespace", () => {
    const made = new Harness(Lookup, {});
    made.addObject(SERVICES, { metadata: { name: 'web', namespace: 'prod' } });
    const slice = (namespace, service) => ({ metadata: { name: 's', namespace, labels: { [SERVICE_NAME_LABEL]: service } } });
    assert.equal(lookup(made, slice('prod', 'web')).metadata.name, 'web');
    assert.equal(lookup(made, slice('prod', 'db')), null);
    assert.equal(lookup(made, slice('staging', 'web')), null);
  });
});
