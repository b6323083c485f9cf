// The native test harness: runs a filter through the same path as its component, with a
// fake host that serves lookups from the objects a test adds and keeps its counters and log
// lines.
//
//   const harness = new Harness(MyFilter, {});
//   assert.equal(harness.filter(ctx, { metadata: { name: 'a' } }), KEEP);

import { Runner, checkedManifest } from './adapter.js';
import * as host from './host.js';
import { encode, isObject } from './json.js';
import { LEVELS, Level } from './types.js';

const encoder = new TextEncoder();

/** A filter configured as the gateway would configure it, with a fake host. */
export class Harness {
  /** Configures `FilterClass` with `config` (`{}` by default); throws an Error with the gateway's message when it refuses it. */
  constructor(FilterClass, config = {}) {
    this.FilterClass = FilterClass;
    /** @type {Map<string, number>} The counters the filter added to. */
    this.counters = new Map();
    /** @type {[string, string][]} The lines the filter logged, as [level, message]. */
    this.logs = [];
    /** The lowest level `host.logEnabled` answers true for. */
    this.logLevel = Level.DEBUG;
    /** @type {Map<string, object[]>} */
    this.objects = new Map();
    this.runner = new Runner(FilterClass);
    const error = this.withHost(() => this.runner.configure(JSON.stringify(config)));
    if (error !== undefined) throw new Error(error);
  }

  /** The filter's manifest, checked as the component checks it. */
  manifest() {
    return this.withHost(() => checkedManifest(this.FilterClass));
  }

  /** Makes `obj` (a JSON value) known to lookups of `resource`. */
  addObject(resource, obj) {
    const key = resourceKey(resource);
    this.objects.set(key, [...(this.objects.get(key) ?? []), obj]);
  }

  /** What the gateway receives for one object (a value, JSON text or bytes): `KEEP`, `DROP` or a `Replace`. */
  filter(ctx, obj) {
    this.runner.context = ctx;
    return this.withHost(() => this.runner.run(bytesOf(obj)));
  }

  /** What the gateway receives for several objects of one response. */
  filterBatch(ctx, objects) {
    this.runner.context = ctx;
    return this.withHost(() => this.runner.runBatch(objects.map(bytesOf)));
  }

  /** Runs `call` with the fake host in place, as the filter's calls run, and returns what it returns. */
  withHost(call) {
    const previous = host.useBackend(new FakeHost(this));
    try {
      return call();
    } finally {
      host.useBackend(previous);
    }
  }
}

/** The key of a resource in the harness's objects. */
function resourceKey({ group, version, resource }) {
  return `${group}/${version}/${resource}`;
}

/** JSON bytes of a test's object: bytes as they are, text encoded, a value as JSON. */
function bytesOf(obj) {
  if (obj instanceof Uint8Array) return obj;
  return encoder.encode(typeof obj === 'string' ? obj : encode(obj));
}

/** The items of a `...List` (a fixture file's text). */
export function listItems(listJson) {
  return JSON.parse(listJson).items;
}

/** The item `namespace/name` of a `...List` (a fixture file's text); throws when there is none. */
export function listItem(listJson, namespace, name) {
  const found = listItems(listJson).find((item) => item.metadata?.namespace === namespace && item.metadata?.name === name);
  if (found === undefined) throw new Error(`no ${namespace}/${name} in the list`);
  return found;
}

/** The host a harness stands for. */
class FakeHost {
  constructor(harness) {
    this.harness = harness;
  }

  #objects(resource) {
    return this.harness.objects.get(resourceKey(resource)) ?? [];
  }

  get(resource, namespace, name) {
    const found = this.#objects(resource).find(
      (obj) => obj.metadata?.namespace === namespace && obj.metadata?.name === name,
    );
    return found === undefined ? undefined : encoder.encode(encode(found));
  }

  list(resource, namespace, selector) {
    const matches = labelSelector(selector);
    return this.#objects(resource)
      .filter((obj) => namespace === undefined || obj.metadata?.namespace === namespace)
      .filter((obj) => matches(isObject(obj.metadata?.labels) ? obj.metadata.labels : {}))
      .map((obj) => encoder.encode(encode(obj)));
  }

  log(level, message) {
    this.harness.logs.push([level, message]);
  }

  logEnabled(level) {
    return LEVELS.indexOf(level) >= LEVELS.indexOf(this.harness.logLevel);
  }

  count(name, delta) {
    this.harness.counters.set(name, (this.harness.counters.get(name) ?? 0) + Number(delta));
  }
}

const REQUIREMENT =
  /^\s*(?:!\s*(?<absent>[\w./-]+)|(?<key>[\w./-]+)\s*(?:(?<op>==|=|!=)\s*(?<value>[\w.-]*)|\s+(?<set>in|notin)\s*\((?<values>[^)]*)\))?)\s*$/;

/**
 * A label selector's test (`a=b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x)`): the fake
 * host's, not the gateway's full parser. Throws on a selector it cannot read, as the
 * gateway traps the call.
 */
export function labelSelector(text) {
  const has = (labels, key) => Object.hasOwn(labels, key);
  const tests = (text.trim() === '' ? [] : text.split(/,(?![^(]*\))/)).map((part) => {
    const found = REQUIREMENT.exec(part)?.groups;
    if (found === undefined) throw new Error(`bad label selector ${JSON.stringify(text)}`);
    const { absent, key, op, value, set, values } = found;
    if (absent !== undefined) return (labels) => !has(labels, absent);
    if (op !== undefined) return (labels) => (has(labels, key) && labels[key] === value) === (op !== '!=');
    if (set !== undefined) {
      const listed = values.split(',').map((v) => v.trim());
      return set === 'in'
        ? (labels) => has(labels, key) && listed.includes(labels[key])
        : (labels) => !has(labels, key) || !listed.includes(labels[key]);
    }
    return (labels) => has(labels, key);
  });
  return (labels) => tests.every((test) => test(labels));
}
