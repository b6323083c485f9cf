// YurtHub's masterservice cases on kube-apiserver's JSON, as filters/masterservice's Rust
// tests have them: only `default/kubernetes`, only its `https` port, and nothing re-encoded
// when nothing changes. Run with `node --test`.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { Context, KEEP, Replace, Verb } from '../sdk/edgegate-filter/index.js';
import { HubAddress, SERVICES } from '../sdk/edgegate-filter/kube.js';
import { Harness, listItem } from '../sdk/edgegate-filter/testing.js';
import MasterService from './masterservice.js';

const SERVICE_LIST = readFileSync(new URL('../../filters/masterservice/fixtures/services.json', import.meta.url), 'utf8');
const service = (namespace, name) => listItem(SERVICE_LIST, namespace, name);
const ctx = () => Context.of('kubelet', Verb.WATCH, SERVICES, { nodeName: 'edge-1' });

test('the kubernetes Service points at the default hub', () => {
  const harness = new Harness(MasterService, {});
  const before = service('default', 'kubernetes');
  const after = harness.filter(ctx(), before).json();
  assert.equal(after.spec.clusterIP, '169.254.2.1');
  assert.deepEqual(after.spec.clusterIPs, ['169.254.2.1']);
  assert.deepEqual(after.spec.ports, [{ name: 'https', protocol: 'TCP', port: 10268, targetPort: 6443 }]);
  // Nothing else moved, resourceVersion least of all.
  for (const field of ['clusterIP', 'clusterIPs', 'ports']) after.spec[field] = before.spec[field];
  assert.deepEqual(after, before);
  assert.equal(harness.counters.get('rewritten'), 1);
});

test('the configured hub is used', () => {
  const harness = new Harness(MasterService, { host: '10.0.0.254', port: 20443 });
  const after = harness.filter(ctx(), service('default', 'kubernetes')).json();
  assert.deepEqual(after.spec.clusterIPs, ['10.0.0.254']);
  assert.equal(after.spec.ports[0].port, 20443);
});

test('only the https port changes', () => {
  const harness = new Harness(MasterService, {});
  const before = service('default', 'kubernetes');
  before.spec.ports = [
    { name: 'metrics', protocol: 'TCP', port: 8443, targetPort: 8443 },
    { name: 'https', protocol: 'TCP', port: 443, targetPort: 6443 },
  ];
  const after = harness.filter(ctx(), before).json();
  assert.deepEqual(after.spec.ports[0], before.spec.ports[0]);
  assert.equal(after.spec.ports[1].port, 10268);
});

test('other Services are kept even when alike', () => {
  const harness = new Harness(MasterService, {});
  const elsewhere = service('default', 'kubernetes');
  elsewhere.metadata.namespace = 'kube-system';
  for (const other of [service('kube-system', 'metrics-server'), service('kube-system', 'kube-dns'), elsewhere]) {
    assert.equal(harness.filter(ctx(), other), KEEP);
  }
  assert.equal(harness.counters.size, 0);
});

test('an already rewritten Service is kept without re-encoding', () => {
  const harness = new Harness(MasterService, {});
  const rewritten = harness.filter(ctx(), service('default', 'kubernetes')).json();
  assert.equal(harness.filter(ctx(), rewritten), KEEP);
  assert.equal(harness.filter(ctx(), JSON.stringify(rewritten, null, 2)), KEEP, 'as kube-apiserver spaces it');
  // A partial rewrite (clusterIPs still the cloud's) is completed.
  const partial = structuredClone(rewritten);
  partial.spec.clusterIPs = ['10.96.0.1'];
  const output = harness.filter(ctx(), partial);
  assert.ok(output instanceof Replace);
  assert.deepEqual(output.json(), rewritten);
});

test('bad configs are refused and the schema is declared', () => {
  for (const bad of [{ host: 'hub' }, { port: 0 }, { tls: true }, { host: '010.0.0.1' }]) {
    assert.throws(() => new Harness(MasterService, bad), /bad config/, JSON.stringify(bad));
  }
  const manifest = new Harness(MasterService, {}).manifest();
  assert.deepEqual(manifest.components, ['kubelet']);
  assert.deepEqual(manifest.matches[0].resources, ['services']);
  assert.deepEqual(manifest.matches[0].verbs, [Verb.LIST, Verb.WATCH]);
  assert.equal(manifest.priority, 50);
  assert.deepEqual(JSON.parse(manifest.schemaText()), HubAddress.schema());
});
