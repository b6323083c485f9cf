// The SDK's own cases: paths, edits counted as the Rust SDK counts them, bad input, JSON
// numbers, decisions, the hub address config, the fake host. Run with `node --test`.

import assert from 'node:assert/strict';
import { describe as suite, test } from 'node:test';

import { Context, DROP, Filter, KEEP, KubeObject, Level, Manifest, ObjectError, Replace, Verb, host } from '../edgegate-filter/index.js';
import { FilterFailure, Runner, describe } from '../edgegate-filter/adapter.js';
import { parseIp } from '../edgegate-filter/ip.js';
import { encode, parseConfig, parseExact } from '../edgegate-filter/json.js';
import { SERVICES, HubAddress, commaList, flag, isLabelValue } from '../edgegate-filter/kube.js';
import { Harness } from '../edgegate-filter/testing.js';

const RAW =
  '{"kind": "Service", "metadata": {"name": "a", "namespace": "n", "resourceVersion": "1",' +
  ' "labels": {"app": "web", "n": 1}}, "spec": {"ports": [{"name": "dns", "port": 53},' +
  ' {"name": "https", "port": 443}], "type": "ClusterIP"}}';
const bytes = (text) => new TextEncoder().encode(text);
const text = (data) => new TextDecoder().decode(data);

suite('KubeObject', () => {
  test('reads', () => {
    const obj = new KubeObject(bytes(RAW));
    assert.deepEqual([obj.kind, obj.namespace, obj.name, obj.resourceVersion], ['Service', 'n', 'a', '1']);
    assert.ok(obj.isNamed('n', 'a'));
    assert.equal(obj.label('app'), 'web');
    assert.equal(obj.label('n'), undefined, 'not a string');
    assert.deepEqual(obj.labels(), { app: 'web' });
    assert.deepEqual(obj.annotations(), {});
    assert.equal(obj.spec('ports.1.port'), 443);
    assert.equal(obj.get('spec.ports.1.name'), 'https');
    assert.equal(obj.get('spec.ports.2.name'), undefined);
    assert.equal(obj.get('spec.type.x'), undefined);
    assert.equal(obj.position('spec.ports', (p) => p.name === 'https'), 1);
    assert.equal(obj.position('spec.type', () => true), undefined);
    assert.ok(!obj.isEdited());
    assert.equal(text(obj.toBytes()), RAW);
  });

  test('isNamed reads escapes and answers unparsed bytes', () => {
    assert.ok(new KubeObject('{"metadata": {"namespace": "n", "name": "kube\\u0072netes"}}').isNamed('n', 'kubernetes'));
    assert.ok(new KubeObject('{"metadata": {"namespace": "n", "name": "a\\/b"}}').isNamed('n', 'a/b'));
    assert.ok(!new KubeObject('{"metadata": {"namespace": "n", "name": "kubernetes2"}}').isNamed('n', 'kubernetes'));
    assert.ok(!new KubeObject('{"metadata": {"namespace": "kubernetes", "name": "n"}}').isNamed('n', 'kubernetes'));
    // Bytes that cannot hold the name are not parsed: a broken body is not noticed.
    assert.ok(!new KubeObject('{"metadata": {"name": "other"}, "spec": [}').isNamed('n', 'kubernetes'));
  });

  test('what is not a JSON object is refused', () => {
    for (const bad of ['[1]', 'nope', '', '"s"', 'null', bytes('7'), new Uint8Array([0xff, 0x7b])]) {
      assert.throws(() => new KubeObject(bad), ObjectError, String(bad));
    }
    for (const bad of [undefined, null, 7, {}, [{}]]) {
      assert.throws(() => new KubeObject(bad), /made from JSON bytes or text/);
    }
    assert.throws(() => KubeObject.fromValue([]), ObjectError);
    // Opening like an object is enough to be made; a read parses the whole.
    const broken = new KubeObject('{"metadata": {"name": "a"');
    assert.throws(() => broken.name, /does not parse whole/);
    assert.throws(() => new KubeObject(new Uint8Array([0x7b, 0xff, 0x7d])).name, /not UTF-8/);
  });

  test('bytes come as any typed array or ArrayBuffer', () => {
    const data = bytes('{"metadata": {"name": "a"}}');
    for (const form of [data, data.buffer, new DataView(data.buffer)]) {
      assert.equal(new KubeObject(form).name, 'a');
    }
  });

  test('fields of the wrong type read as absent', () => {
    const obj = new KubeObject('{"metadata": {"name": 7, "namespace": null, "labels": ["x"], "annotations": "a"}, "spec": 3}');
    assert.deepEqual([obj.name, obj.namespace, obj.label('0'), obj.annotation('a')], [undefined, undefined, undefined, undefined]);
    assert.deepEqual([obj.labels(), obj.annotations()], [{}, {}]);
    assert.equal(obj.spec('x'), undefined);
    assert.equal(obj.get('metadata.namespace'), null, 'a JSON null is read as null');
    assert.equal(obj.get('metadata.namespace.x'), undefined);
    assert.equal(obj.position('metadata.annotations', (item) => item.missing.field), undefined, 'not reached');
    assert.ok(!obj.isEdited());
  });

  test('inherited members are not members', () => {
    const obj = new KubeObject('{"metadata": {"name": "a", "labels": {"__proto__": "x"}}}');
    for (const path of ['constructor', 'metadata.toString', 'metadata.__proto__', 'metadata.name.length']) {
      assert.equal(obj.get(path), undefined, path);
    }
    assert.equal(obj.label('__proto__'), 'x');
    assert.equal(obj.label('constructor'), undefined);
    obj.setLabel('__proto__', 'y');
    assert.ok(obj.set('metadata.__proto__', { polluted: true }));
    assert.equal({}.polluted, undefined);
    assert.deepEqual(JSON.parse(text(obj.edits())).metadata, {
      name: 'a',
      labels: { ['__proto__']: 'y' },
      ['__proto__']: { polluted: true },
    });
  });

  test('update edits only when the value differs', () => {
    let obj = new KubeObject(RAW);
    assert.ok(!obj.update('spec.ports.1.port', 443));
    assert.ok(!obj.isEdited());
    assert.ok(obj.update('spec.ports.1.port', '443'), 'a string is another value');
    assert.ok(obj.isEdited());
    obj = new KubeObject(RAW);
    obj.setLabel('app', 'web');
    assert.ok(!obj.isEdited());
    assert.equal(obj.remove('spec.none'), undefined);
    assert.equal(obj.removeAnnotation('none'), undefined);
    assert.ok(!obj.isEdited());
    assert.throws(() => obj.setLabel('app', 7), TypeError);
  });

  test('set adds objects but never array items', () => {
    const obj = new KubeObject(RAW);
    assert.ok(!obj.set('spec.ports.2.port', 1));
    assert.ok(!obj.set('spec.type.x', 1));
    assert.ok(!obj.set('spec.ports.x', 1));
    assert.ok(!obj.set('metadata.labels.app.x.y', 1));
    assert.ok(!obj.isEdited());
    assert.ok(obj.set('status.loadBalancer.ingress', []));
    assert.deepEqual(obj.status('loadBalancer'), { ingress: [] });
    assert.ok(obj.setSpec('ports.0.port', 54));
    assert.equal(obj.spec('ports.0.port'), 54);
    assert.deepEqual(obj.remove('spec.type'), 'ClusterIP');
    assert.ok(obj.isEdited());
  });

  test('labels and annotations are made where null', () => {
    const obj = new KubeObject('{"metadata": {"name": "a", "labels": null}}');
    obj.setLabel('k', 'v');
    obj.setAnnotation('a', 'b');
    assert.deepEqual(obj.value.metadata, { name: 'a', labels: { k: 'v' }, annotations: { a: 'b' } });
    assert.equal(obj.removeLabel('k'), 'v');
    obj.name = 'b';
    obj.kind = 'Service';
    assert.deepEqual([obj.name, obj.kind], ['b', 'Service']);
    // A label goes into an object, never into an array in its place.
    const listed = new KubeObject('{"metadata": {"labels": ["x"], "annotations": {"a": "b"}}}');
    listed.setLabel('0', 'v');
    assert.deepEqual(listed.value.metadata.labels, { 0: 'v' });
    listed.setAnnotation('a', 'b');
    listed.name = 'n';
    assert.equal(listed.name, 'n');
    const unchanged = new KubeObject('{"metadata": {"name": "n", "annotations": {"a": "b"}}}');
    unchanged.setAnnotation('a', 'b');
    unchanged.name = 'n';
    assert.ok(!unchanged.isEdited());
  });

  test('mut accessors count as edits but forward nothing unchanged', () => {
    const obj = new KubeObject(RAW);
    obj.specMut('ports');
    assert.ok(obj.isEdited());
    assert.equal(obj.edits(), undefined);
    obj.getMut('spec.ports').pop();
    assert.deepEqual(new KubeObject(obj.edits()).spec('ports'), [{ name: 'dns', port: 53 }]);
  });

  test('retainItems', () => {
    const obj = new KubeObject('{"metadata": {}, "endpoints": [{"n": 1}, {"n": 2}]}');
    assert.ok(!obj.retainItems('endpoints', () => true));
    assert.ok(!obj.retainItems('none', () => false));
    assert.ok(!obj.isEdited());
    assert.ok(obj.retainItems('endpoints', (item) => item.n === 2));
    assert.deepEqual(obj.get('endpoints'), [{ n: 2 }]);
  });

  test('non-ASCII is written as UTF-8', () => {
    const obj = new KubeObject(bytes('{"metadata": {"name": "é"}}'));
    obj.setLabel('k', 'ü ☃');
    assert.match(text(obj.edits()), /"k":"ü ☃"/);
  });
});

suite('JSON', () => {
  test('integers beyond 2^53 are forwarded digit for digit', () => {
    const source =
      '{"metadata":{"name":"a"},"spec":{"big":18446744073709551615,"small":-9007199254740993,' +
      '"safe":9007199254740991,"f":1.5,"items":[{"n":12345678901234567}],"gone":12345678901234567}}';
    const obj = new KubeObject(source);
    assert.equal(obj.spec('big'), 18446744073709551615, 'read as the nearest double');
    obj.setLabel('k', 'v');
    obj.remove('spec.gone');
    assert.match(
      text(obj.edits()),
      /"big":18446744073709551615,"small":-9007199254740993,"safe":9007199254740991,"f":1.5,"items":\[\{"n":12345678901234567\}\]\}/,
    );
    assert.equal(obj.spec('big'), 18446744073709551615, 'the value itself is left as it was');
    // What the filter sets is written as it set it: a BigInt by its digits.
    obj.setSpec('big', 2n ** 60n);
    obj.setSpec('items', [{ n: 12345678901234567n }]);
    assert.match(text(obj.toBytes()), /"big":1152921504606846976,.*"items":\[\{"n":12345678901234567\}\]/);
    assert.equal(encode({ a: [1n, 'x', null, undefined, { b: undefined }] }), '{"a":[1,"x",null,null,{}]}');
    assert.equal(new Replace(source).json().spec.big, 18446744073709551615n);
  });

  test('the slower reader refuses what JSON.parse refuses', () => {
    for (const bad of ['{"a": 12345678901234567,}', '{"a": 12345678901234567', '{"a": 1234567890123456 x}', "{'a': 1234567890123456}", '{"a": NaN, "b": 1234567890123456}', '{"a\\x": 1234567890123456}']) {
      assert.throws(() => parseExact(bad), SyntaxError, bad);
    }
    assert.deepEqual(parseExact(' {"a\\"b": [1234567890123456, true, false, null, "\\u00e9\\\\"]} '), {
      'a"b': [1234567890123456, true, false, null, 'é\\'],
    });
  });

  test('config numbers spelled as floats are no integers', () => {
    const config = parseConfig('{"port": 443.0, "ratio": 0.5, "n": 3, "e": 1e3}');
    assert.ok(!Number.isInteger(config.port));
    assert.equal(config.port + 1, 444);
    assert.deepEqual([config.ratio, config.n], [0.5, 3]);
    assert.ok(!Number.isInteger(config.e));
  });
});

suite('IP addresses', () => {
  test('are read and written as Rust reads and writes them', () => {
    const cases = {
      '169.254.2.1': '169.254.2.1',
      'fd00::2': 'fd00::2',
      'FD00:0:0:0:0:0:0:2': 'fd00::2',
      '::': '::',
      '::1': '::1',
      '::ffff:10.0.0.1': '::ffff:10.0.0.1',
      '::ffff:a00:1': '::ffff:10.0.0.1',
      '::10.0.0.1': '::a00:1',
      '1:0:0:1:0:0:0:1': '1:0:0:1::1',
      '1:0:0:2:0:0:3:4': '1::2:0:0:3:4',
      '1:0:2:3:4:5:6:7': '1:0:2:3:4:5:6:7',
      '0001:2:3:4:5:6:7::': '1:2:3:4:5:6:7:0',
      '64:ff9b::192.0.2.33': '64:ff9b::c000:221',
    };
    for (const [input, written] of Object.entries(cases)) {
      assert.equal(parseIp(input)?.text, written, input);
    }
    for (const bad of ['010.0.0.1', '1.2.3', '256.0.0.1', '1.2.3.4.5', 'hub', '', 'fe80::1%eth0', '[::1]', ':::', '1::2::3', '1:2:3:4:5:6:7:8:9', '1:2:3:4:5:6:7:8::', '1.2.3.4::', '1:2:3:4:5:6:7:1.2.3.4', '12345::', '::g']) {
      assert.equal(parseIp(bad), undefined, bad);
    }
  });
});

class Stamp extends Filter {
  constructor({ annotation = 'example.com/node' } = {}) {
    super();
    this.annotation = annotation;
  }

  static manifest() {
    return new Manifest('stamp', '0.1.0');
  }

  filter(ctx, obj) {
    if (flag(obj, 'example.com/drop')) return DROP;
    if (obj.name === 'replace') return Replace.of({ metadata: { name: 'replace' } });
    if (obj.name === 'throw') throw new RangeError('thrown');
    if (host.get(SERVICES, obj.namespace, 'web') !== undefined) host.count('found', 2);
    if (host.logEnabled(Level.DEBUG)) host.log(Level.DEBUG, `stamping ${obj.name}`);
    obj.setAnnotation(this.annotation, ctx.nodeName);
    return KEEP;
  }
}

suite('Harness', () => {
  const ctx = Context.of('kubelet', Verb.LIST, SERVICES, { nodeName: 'edge-1' });

  test('decisions, lookups, counters and logs', () => {
    const harness = new Harness(Stamp, { annotation: 'a' });
    harness.addObject(SERVICES, { metadata: { namespace: 'n', name: 'web', labels: { x: 'y' } } });
    const outputs = harness.filterBatch(ctx, [
      { metadata: { name: 'd', annotations: { 'example.com/drop': 'true' } } },
      { metadata: { name: 'replace' } },
      { metadata: { name: 's', namespace: 'n', annotations: { a: 'edge-1' } } },
      '{"metadata": {"name": "t", "namespace": "n"}}',
    ]);
    assert.deepEqual(outputs.slice(0, 3), [DROP, new Replace('{"metadata":{"name":"replace"}}'), KEEP]);
    assert.deepEqual(outputs[3].json().metadata.annotations, { a: 'edge-1' });
    assert.equal(harness.counters.get('found'), 4);
    assert.deepEqual(harness.logs[0], [Level.DEBUG, 'stamping s']);
    const listed = (selector) => harness.withHost(() => host.list(SERVICES, 'n', selector)).length;
    assert.deepEqual([listed('x=y'), listed('x!=y'), listed('x in (a, y),!z'), listed('x notin (y)'), listed('')], [1, 0, 1, 0, 1]);
    assert.throws(() => listed('x=(y'), /bad label selector/);
    assert.equal(harness.withHost(() => host.get(SERVICES, 'm', 'web')), undefined);
  });

  test('the log level and bad host calls', () => {
    const harness = new Harness(Stamp, {});
    harness.logLevel = Level.INFO;
    harness.filter(ctx, { metadata: { name: 's' } });
    assert.deepEqual(harness.logs, []);
    harness.withHost(() => {
      assert.throws(() => host.log('loud', 'x'), TypeError);
      assert.throws(() => host.count('c', -1), RangeError);
      assert.throws(() => host.count('c', 1.5), RangeError);
      assert.throws(() => host.count('c', 2n ** 64n), RangeError);
      host.count('c', 2n);
      host.count('c');
    });
    assert.equal(harness.counters.get('c'), 3);
  });

  test('a config the filter refuses is refused', () => {
    assert.throws(() => new Harness(HubFilter, { port: 'x' }), /bad config: bad host\/port config/);
    assert.throws(() => new Harness(HubFilter, []), /not a JSON object/);
  });

  test('what a filter throws or returns wrongly fails the call', () => {
    const harness = new Harness(Stamp, {});
    assert.throws(() => harness.filter(ctx, { metadata: { name: 'throw' } }), RangeError);
    assert.throws(() => harness.filter(ctx, '[1]'), FilterFailure);
    assert.match(harness.logs.at(-1)[1], /not a Kubernetes object: not a JSON object: array/);
    class Wrong extends Stamp {
      filter() {
        return 'keep';
      }
    }
    assert.throws(() => new Harness(Wrong, {}).filter(ctx, {}), /returned string keep, not KEEP, DROP or a Replace/);
    class Short extends Stamp {
      filterBatch() {
        return [KEEP];
      }
    }
    assert.throws(() => new Harness(Short, {}).filterBatch(ctx, [{}, {}]), /1 items for 2 objects/);
    const unconfigured = new Runner(Stamp);
    assert.throws(() => unconfigured.run(bytes('{}')), /before configure/);
  });

  test('a bad manifest is named', () => {
    class Bad extends Stamp {
      static manifest() {
        return new Manifest('bad', '0.1.0', { matches: [{ group: '', resources: ['pods'], verbs: ['get', 'read'] }] });
      }
    }
    assert.throws(() => new Harness(Bad, {}).manifest(), /Bad.manifest\(\): a verb is not one of/);
    assert.equal(new Harness(Stamp, {}).manifest().name, 'stamp');
  });
});

class HubFilter extends Filter {
  static manifest() {
    return new Manifest('hub', '0.1.0');
  }

  static fromConfig(config) {
    const filter = new HubFilter();
    filter.hub = HubAddress.fromConfig(config);
    return filter;
  }
}

suite('describe', () => {
  test('names an exception and its calls, innermost last', () => {
    const error = new TypeError('boom');
    error.stack =
      'inner@masterservice/masterservice.js:40:7\nouter@sdk/edgegate-filter/adapter.js:70:12\n' +
      'logged@sdk/edgegate-filter/guest.js:41:12\n@component.js:5:3\nexport_filter@/tmp/1/sources/initializer.js:685:9\n';
    assert.equal(
      describe(error),
      'TypeError: boom; in (top level) (component.js:5) > outer (sdk/edgegate-filter/adapter.js:70) > inner (masterservice/masterservice.js:40)',
    );
    assert.equal(describe('text'), 'string thrown: text');
  });
});

suite('kube', () => {
  test('the hub address', () => {
    let hub = HubAddress.fromConfig({});
    assert.deepEqual([hub.host, hub.port, hub.addressType], ['169.254.2.1', 10268, 'IPv4']);
    hub = HubAddress.fromConfig({ host: 'FD00::2', port: 443 });
    assert.deepEqual([hub.host, hub.addressType], ['fd00::2', 'IPv6']);
    for (const [bad, why] of [
      [{ host: 'hub.local' }, /not an IP/],
      [{ host: 'fe80::1%eth0' }, /not an IP/],
      [{ host: null }, /bad host\/port config/],
      [{ port: 0 }, /between 1 and 65535/],
      [{ port: 70000 }, /bad host\/port config/],
      [{ port: true }, /bad host\/port config/],
      [{ port: parseConfig('443.0') }, /bad host\/port config/],
      [{ hots: '10.0.0.1' }, /unknown field `hots`/],
    ]) {
      assert.throws(() => HubAddress.fromConfig(bad), why, JSON.stringify(bad));
    }
  });

  test('setNamedPort', () => {
    const hub = new HubAddress();
    const obj = new KubeObject(RAW);
    assert.ok(hub.setNamedPort(obj, 'spec.ports', 'https'));
    assert.deepEqual(obj.spec('ports'), [{ name: 'dns', port: 53 }, { name: 'https', port: 10268 }]);
    assert.ok(!hub.setNamedPort(obj, 'spec.ports', 'https'), 'already set');
    assert.ok(!hub.setNamedPort(obj, 'spec.ports', 'http'));
    assert.ok(!hub.setNamedPort(obj, 'spec.none', 'https'));
    assert.ok(!hub.setNamedPort(new KubeObject('{"spec": {"ports": [null, 3, ["https"]]}}'), 'spec.ports', 'https'));
  });

  test('annotation values', () => {
    assert.deepEqual(commaList(' foo, -bar ,,*, '), ['foo', '-bar', '*']);
    assert.ok(isLabelValue('pool-1'));
    assert.ok(isLabelValue('x'.repeat(63)));
    for (const bad of ['', '-a', 'a-', 'a b', 'x'.repeat(64), 'é', 7]) {
      assert.ok(!isLabelValue(bad), String(bad));
    }
  });
});
