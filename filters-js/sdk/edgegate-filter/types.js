// The request context, the manifest and the decisions, as plain JavaScript values. They
// mirror the `edgegate:filter` WIT world (filters-sdk/wit/filter.wit) and the Rust SDK's
// `types` module; guest.js converts them to and from what the component's bindings take.

import { encode, parseExact } from './json.js';

/**
 * The Kubernetes verb of the request being served, valued as Kubernetes spells it. The
 * members are in the WIT world's order.
 * @enum {string}
 */
export const Verb = Object.freeze({
  GET: 'get',
  LIST: 'list',
  WATCH: 'watch',
  CREATE: 'create',
  UPDATE: 'update',
  PATCH: 'patch',
  DELETE: 'delete',
  DELETE_COLLECTION: 'deletecollection',
});

/** The verbs, in the WIT world's order. */
export const VERBS = Object.freeze(Object.values(Verb));

/**
 * Severity of a log line, valued as the WIT world spells it.
 * @enum {string}
 */
export const Level = Object.freeze({
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
});

/** The levels, lowest first. */
export const LEVELS = Object.freeze(Object.values(Level));

/** A Kubernetes resource by API group (empty for the core group), version and plural name. */
export class Resource {
  /** What a lookup (`host.get`, `host.list`) names: `new Resource('', 'v1', 'services')`. */
  constructor(group, version, resource) {
    /** @type {string} */ this.group = group;
    /** @type {string} */ this.version = version;
    /** @type {string} */ this.resource = resource;
    Object.freeze(this);
  }
}

/** The request an object belongs to. */
export class Context {
  /**
   * A context from its fields, as `begin` receives them; `Context.of` is shorter in tests.
   * @param {{component: string, verb: string, group?: string, version?: string,
   *   resource?: string, namespace?: string, nodeName?: string, nodePool?: string}} fields
   */
  constructor({ component, verb, group = '', version = 'v1', resource = '', namespace, nodeName = '', nodePool }) {
    /** The sending component: the User-Agent up to its first `/`, lowercased. */
    this.component = component;
    /** The verb, a `Verb` value. */
    this.verb = verb;
    /** API group; empty for the core group. */
    this.group = group;
    /** API version. */
    this.version = version;
    /** Resource, plural and lowercase. */
    this.resource = resource;
    /** @type {string | undefined} Namespace of the request; undefined when cluster-wide. */
    this.namespace = namespace ?? undefined;
    /** Name of the node the gateway runs on. */
    this.nodeName = nodeName;
    /** @type {string | undefined} Node pool of that node, if known. */
    this.nodePool = nodePool ?? undefined;
  }

  /** A context for a request of `component` with `verb` on `resource`; `namespace`, `nodeName`, `nodePool` in `rest`. */
  static of(component, verb, resource, rest = {}) {
    const { group, version } = resource;
    return new Context({ ...rest, component, verb, group, version, resource: resource.resource });
  }
}

/** A group of resources and verbs a filter handles; versions are not distinguished. */
export class ResourceMatch {
  /** `group` (empty for the core group), plural `resources`, and `verbs` (`Verb` values). */
  constructor(group, resources, verbs) {
    this.group = group;
    this.resources = resources;
    this.verbs = verbs;
  }
}

/** The config schema of a filter that takes no config: the gateway refuses any key at load. */
export const NO_CONFIG = Object.freeze({ type: 'object', additionalProperties: false });

/** What a filter says about itself; read once when it is loaded. */
export class Manifest {
  /**
   * The manifest of filter `name` (loaded from `NAME.wasm`) at its own `version`.
   * @param {string} name
   * @param {string} version
   * @param {{matches?: {group: string, resources: string[], verbs: string[]}[],
   *   components?: string[], priority?: number, configSchema?: object}} [options]
   */
  constructor(name, version, { matches = [], components = [], priority = 0, configSchema } = {}) {
    this.name = name;
    this.version = version;
    /** Resources and verbs it handles. */
    this.matches = matches;
    /** Components it applies to by default (the gateway config may add or remove some). */
    this.components = components;
    /** Order in the chain: lower runs first; ties are broken by name. */
    this.priority = priority;
    /** JSON Schema (draft 2020-12) of the config, if any (`NO_CONFIG` for none at all). */
    this.configSchema = configSchema;
  }

  /** The config schema as the JSON text the WIT world carries, or undefined. */
  schemaText() {
    return this.configSchema === undefined ? undefined : JSON.stringify(this.configSchema);
  }
}

/** Pass the object on as the filter left it: its original bytes unless it was edited. */
export class Keep {}

/** Leave the object out (in a watch the gateway sends DELETED if the client had seen it). */
export class Drop {}

/**
 * Pass on this JSON instead: an object with the `metadata.name`, `namespace` and
 * `resourceVersion` of the object it replaces, or the gateway refuses it.
 */
export class Replace {
  /** A replacement by JSON bytes (a `Uint8Array`) or JSON text (a string). */
  constructor(data) {
    if (typeof data === 'string') {
      data = new TextEncoder().encode(data);
    } else if (!(data instanceof Uint8Array)) {
      throw new TypeError('a replacement is JSON bytes (a Uint8Array) or JSON text');
    }
    /** @type {Uint8Array} */
    this.data = data;
  }

  /** A replacement by the JSON encoding of `value`. */
  static of(value) {
    return new Replace(encode(value));
  }

  /** The replacement parsed as JSON, integers beyond 2^53 as BigInt. */
  json() {
    return parseExact(new TextDecoder().decode(this.data));
  }
}

/** The `Keep` decision. */
export const KEEP = Object.freeze(new Keep());

/** The `Drop` decision. */
export const DROP = Object.freeze(new Drop());

/** @typedef {Keep | Drop | Replace} Decision What a filter decides about one object. */
