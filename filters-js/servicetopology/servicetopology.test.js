// YurtHub's servicetopology cases on kube-apiserver's JSON, plus v1 Endpoints, as
// filters/servicetopology's Rust tests (and filters-py's port) have them, on the same
// fixtures. Run with `node --test`.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { Context, KEEP, Level, Replace, Resource, Verb } from '../sdk/edgegate-filter/index.js';
import { NODES, SERVICES } from '../sdk/edgegate-filter/kube.js';
import { NODE_POOLS } from '../sdk/edgegate-filter/pool.js';
import { Harness, listItems } from '../sdk/edgegate-filter/testing.js';
import ServiceTopology from './servicetopology.js';

const FIXTURES = new URL('../../filters/servicetopology/fixtures/', import.meta.url);
const items = (name) => listItems(readFileSync(new URL(name, FIXTURES), 'utf8'));

// The addresses in the fixtures, by node: edge-1 and edge-2 are in pool hangzhou, edge-3 in
// shanghai; 192.168.7.20 has no node.
const ON_EDGE_1 = ['10.244.1.2', '10.244.1.4'].sort();
const IN_HANGZHOU = ['10.244.1.2', '10.244.2.3', '10.244.1.4'].sort();
const ALL = ['10.244.1.2', '10.244.2.3', '10.244.1.4', '10.244.3.5', '192.168.7.20'].sort();

/** One of the three shapes of endpoints the filter serves. */
class Shape {
  constructor(name, group, version, resource, fixture) {
    Object.assign(this, { name, resource: new Resource(group, version, resource), fixture });
    this.key = resource === 'endpoints' ? 'subsets' : 'endpoints';
  }

  /** A kube-proxy watch of this shape on `node` in `pool`. */
  ctx(pool = undefined, node = 'edge-1') {
    return Context.of('kube-proxy', Verb.WATCH, this.resource, { nodeName: node, nodePool: pool });
  }

  /** The fixture object, made to belong to `service` (undefined: to no Service). */
  objectOf(service) {
    const obj = items(this.fixture)[0];
    const labels = (obj.metadata.labels ??= {});
    if (this.key === 'subsets') obj.metadata.name = service;
    else if (service === undefined) delete labels['kubernetes.io/service-name'];
    else labels['kubernetes.io/service-name'] = service;
    return obj;
  }

  /** The addresses of an object's endpoints, sorted (ready and not ready). */
  addresses(obj) {
    if (this.key === 'endpoints') return obj.endpoints.flatMap((e) => e.addresses).sort();
    return obj.subsets
      .flatMap((subset) => ['addresses', 'notReadyAddresses'].flatMap((key) => subset[key] ?? []))
      .map((address) => address.ip)
      .sort();
  }
}

const V1BETA1 = new Shape('v1beta1', 'discovery.k8s.io', 'v1beta1', 'endpointslices', 'endpointslices.v1beta1.json');
const V1 = new Shape('v1', 'discovery.k8s.io', 'v1', 'endpointslices', 'endpointslices.v1.json');
const ENDPOINTS = new Shape('endpoints', '', 'v1', 'endpoints', 'endpoints.json');
const SHAPES = [V1BETA1, V1, ENDPOINTS];

/** The filter, with the fixtures' Services known (and, if asked, its pools and nodes). */
function harness({ pools = true, nodes = true } = {}) {
  const made = new Harness(ServiceTopology, {});
  for (const service of items('services.json')) made.addObject(SERVICES, service);
  for (const pool of pools ? items('nodepools.json') : []) made.addObject(NODE_POOLS, pool);
  for (const node of nodes ? items('nodes.json') : []) made.addObject(NODES, node);
  return made;
}

/** The addresses sent on for the fixture of `shape` for `service`, on edge-1 in `pool`; checks that nothing but the endpoints changed. */
function kept(made, shape, service, pool) {
  const obj = shape.objectOf(service);
  const output = made.filter(shape.ctx(pool), obj);
  if (output === KEEP) return shape.addresses(obj);
  assert.ok(output instanceof Replace, `${shape.name} ${service}: never dropped`);
  const out = output.json();
  assert.deepEqual({ ...out, [shape.key]: null }, { ...obj, [shape.key]: null }, shape.name);
  return shape.addresses(out);
}

test('hostname topology keeps this node\'s endpoints', () => {
  const made = harness();
  for (const shape of SHAPES) {
    for (const pool of ['hangzhou', undefined]) {
      assert.deepEqual(kept(made, shape, 'web-node', pool), ON_EDGE_1, `${shape.name} ${pool}`);
    }
  }
  assert.equal(made.counters.get('pruned'), 6);
});

test('a prune is logged at debug only when the log shows debug', () => {
  const made = harness();
  const debugLines = () => made.logs.filter(([level, line]) => level === Level.DEBUG && line.startsWith('pruned')).length;
  kept(made, V1BETA1, 'web-node', undefined);
  assert.equal(debugLines(), 1);
  made.logLevel = Level.INFO;
  kept(made, V1BETA1, 'web-node', undefined);
  assert.equal(debugLines(), 1, 'not written, as the host does not show it');
  assert.equal(made.counters.get('pruned'), 2, 'counted all the same');
});

test('pool and zone topology keep the pool\'s endpoints', () => {
  const made = harness({ nodes: false });
  for (const shape of SHAPES) {
    for (const service of ['web-pool', 'web-zone']) {
      assert.deepEqual(kept(made, shape, service, 'hangzhou'), IN_HANGZHOU, `${shape.name} ${service}`);
    }
  }
});

test('pool members come from labelled nodes without a NodePool', () => {
  const made = harness({ pools: false });
  for (const shape of SHAPES) assert.deepEqual(kept(made, shape, 'web-pool', 'hangzhou'), IN_HANGZHOU, shape.name);
});

test('a node in no pool falls back to the hostname rule', () => {
  const made = harness();
  for (const shape of SHAPES) {
    for (const pool of [undefined, '']) {
      assert.deepEqual(kept(made, shape, 'web-pool', pool), ON_EDGE_1, `${shape.name} ${JSON.stringify(pool)}`);
    }
  }
});

test('this node counts as a member before the NodePool lists it', () => {
  const made = harness({ pools: false, nodes: false });
  made.addObject(NODE_POOLS, { metadata: { name: 'hangzhou' }, status: { nodes: ['edge-2'] } });
  assert.deepEqual(kept(made, V1, 'web-pool', 'hangzhou'), IN_HANGZHOU);
});

test('an unknown pool leaves the endpoints alone', () => {
  const made = harness({ pools: false, nodes: false });
  for (const shape of SHAPES) assert.equal(made.filter(shape.ctx('hangzhou'), shape.objectOf('web-pool')), KEEP, shape.name);
  assert.equal(made.counters.get('pool-unknown'), 3);
  assert.equal(made.logs.filter(([level]) => level === Level.WARN).length, 3, 'one per call');
});

test('no endpoints left still sends the object empty', () => {
  const made = harness();
  // edge-9 has no endpoints, and neither has its pool, beijing.
  made.addObject(NODES, { metadata: { name: 'edge-9', labels: { 'apps.openyurt.io/nodepool': 'beijing' } } });
  for (const shape of SHAPES) {
    const obj = shape.objectOf('web-pool');
    for (const pool of ['beijing', undefined]) {
      const out = made.filter(shape.ctx(pool, 'edge-9'), obj).json();
      assert.deepEqual(out[shape.key], [], shape.name);
      assert.deepEqual(out.metadata, obj.metadata);
    }
  }
});

test('Services without a known topology keep their endpoints', () => {
  const made = harness();
  made.addObject(SERVICES, {
    metadata: { name: 'web-region', namespace: 'default', annotations: { 'openyurt.io/topologyKeys': 'topology.kubernetes.io/region' } },
  });
  for (const shape of SHAPES) {
    for (const service of ['web-plain', 'web-region', 'web-missing']) {
      assert.equal(made.filter(shape.ctx('hangzhou'), shape.objectOf(service)), KEEP, `${shape.name} ${service}`);
    }
  }
  for (const shape of [V1BETA1, V1]) assert.equal(made.filter(shape.ctx(), shape.objectOf(undefined)), KEEP, shape.name);
  assert.equal(made.counters.size, 0);
});

test('endpoints without a node are never kept', () => {
  const made = harness();
  for (const shape of SHAPES) assert.ok(!kept(made, shape, 'web-pool', 'hangzhou').includes('192.168.7.20'), shape.name);
});

test('v1beta1 endpoints fall back to their nodeName', () => {
  const slice = V1BETA1.objectOf('web-node');
  for (const endpoint of slice.endpoints) {
    const topology = endpoint.topology;
    if (topology !== null && typeof topology === 'object' && !Array.isArray(topology)) {
      endpoint.nodeName = topology['kubernetes.io/hostname'];
      delete topology['kubernetes.io/hostname'];
    }
  }
  const out = harness().filter(V1BETA1.ctx(), slice).json();
  assert.deepEqual(V1BETA1.addresses(out), ON_EDGE_1);
});

test('objects whose endpoints all stay are kept as they are', () => {
  const made = harness();
  for (const shape of SHAPES) {
    const pruned = made.filter(shape.ctx(), shape.objectOf('web-node')).json();
    // Only edge-1's endpoints are left: nothing to remove, so nothing is re-encoded.
    assert.equal(made.filter(shape.ctx(), pruned), KEEP, shape.name);
  }
});

test('other versions and resources are kept', () => {
  const made = harness();
  const slice = V1.objectOf('web-node');
  for (const resource of [new Resource('discovery.k8s.io', 'v1alpha1', 'endpointslices'), new Resource('', 'v1', 'pods')]) {
    assert.equal(made.filter(Context.of('kube-proxy', Verb.LIST, resource, { nodeName: 'edge-1' }), slice), KEEP);
  }
});

test('a batch decides each slice of a list', () => {
  const made = harness();
  const batch = ['web-node', 'web-plain', 'web-pool', 'web-missing'].map((s) => V1.objectOf(s));
  const before = structuredClone(batch);
  const outs = made.filterBatch(V1.ctx('hangzhou'), batch);
  assert.deepEqual(V1.addresses(outs[0].json()), ON_EDGE_1);
  assert.equal(outs[1], KEEP);
  assert.deepEqual(V1.addresses(outs[2].json()), IN_HANGZHOU);
  assert.equal(outs[3], KEEP);
  assert.deepEqual(batch, before);
  assert.deepEqual(V1.addresses(batch[1]), ALL);
});

test('the manifest covers slices and endpoints for the proxies', () => {
  const manifest = new Harness(ServiceTopology, {}).manifest();
  assert.equal(manifest.name, 'servicetopology');
  assert.deepEqual(manifest.components, ['kube-proxy', 'coredns', 'nginx-ingress-controller']);
  const resources = manifest.matches.flatMap((m) => m.resources.map((r) => [m.group, r]));
  assert.deepEqual(resources, [['discovery.k8s.io', 'endpointslices'], ['', 'endpoints']]);
  assert.ok(manifest.matches.every((m) => m.verbs.length === 2 && m.verbs[0] === Verb.LIST && m.verbs[1] === Verb.WATCH));
});
