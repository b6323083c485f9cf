// Kubernetes and OpenYurt knowledge filters share: annotation values, the hub's address, the
// resources lookups name.

import { ConfigError } from './filter.js';
import { parseIp } from './ip.js';
import { isObject } from './json.js';
import { Resource } from './types.js';

/** Services. */
export const SERVICES = new Resource('', 'v1', 'services');
/** Nodes. */
export const NODES = new Resource('', 'v1', 'nodes');
/** Endpoints. */
export const ENDPOINTS = new Resource('', 'v1', 'endpoints');
/** EndpointSlices. */
export const ENDPOINT_SLICES = new Resource('discovery.k8s.io', 'v1', 'endpointslices');

/** YurtHub's default: the address of the dummy interface it creates on every edge node. */
export const DEFAULT_HOST = '169.254.2.1';
/** YurtHub's default: its HTTPS proxy port, the one in-cluster clients can use. */
export const DEFAULT_PORT = 10268;
/** Namespace of the Service through which pods reach the cluster's API. */
export const API_SERVICE_NAMESPACE = 'default';
/** Name of that Service. */
export const API_SERVICE_NAME = 'kubernetes';
/** Name of its port that carries the API. */
export const API_PORT_NAME = 'https';

/** Whether the annotation `key` is exactly `"true"`, the one spelling OpenYurt honours. */
export function flag(obj, key) {
  return obj.annotation(key) === 'true';
}

/** The items of a comma-separated value (`foo, -bar,*`), trimmed, empty items left out. */
export function commaList(value) {
  return value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

/** Whether `value` is a valid non-empty label value (at most 63 characters: alphanumerics, with `-`, `_` or `.` inside). */
export function isLabelValue(value) {
  return typeof value === 'string' && /^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/.test(value);
}

/**
 * The gateway's address as node clients should use it. As a filter's config it reads from
 * `{"host": "<IP>", "port": <1..65535>}`, both optional (`HubAddress.schema()`).
 */
export class HubAddress {
  /** The address `host` (an IP address) and `port`; throws `ConfigError` when they are none. */
  constructor(host = DEFAULT_HOST, port = DEFAULT_PORT) {
    if (typeof host !== 'string') throw new ConfigError('bad host/port config: host is not a string');
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      throw new ConfigError('bad host/port config: port is not an integer of 0 to 65535');
    }
    if (port === 0) throw new ConfigError('port must be between 1 and 65535');
    const ip = parseIp(host);
    if (ip === undefined) throw new ConfigError(`host ${JSON.stringify(host)} is not an IP address`);
    /** The IP as text, as it goes into objects (as the Rust SDK writes it: `fd00::2`). */
    this.host = ip.text;
    /** The IP's version, 4 or 6. */
    this.ipVersion = ip.version;
    /** The port clients connect to. */
    this.port = port;
    Object.freeze(this);
  }

  /** The JSON Schema of the config, the same as the Rust SDK's. */
  static schema() {
    return {
      type: 'object',
      properties: {
        host: {
          type: 'string',
          minLength: 1,
          default: DEFAULT_HOST,
          description: 'IP address at which node clients reach the gateway',
        },
        port: {
          type: 'integer',
          minimum: 1,
          maximum: 65535,
          default: DEFAULT_PORT,
          description: 'port at which node clients reach the gateway (HTTPS)',
        },
      },
      additionalProperties: false,
    };
  }

  /** Reads a config of the shape `schema()` describes; throws `ConfigError`. */
  static fromConfig(config) {
    const unknown = Object.keys(config).filter((key) => key !== 'host' && key !== 'port').sort();
    if (unknown.length > 0) throw new ConfigError(`bad host/port config: unknown field \`${unknown[0]}\``);
    const field = (key, otherwise) => (Object.hasOwn(config, key) ? config[key] : otherwise);
    return new HubAddress(field('host', DEFAULT_HOST), field('port', DEFAULT_PORT));
  }

  /** The `addressType` of an EndpointSlice that holds this address (`IPv4` or `IPv6`). */
  get addressType() {
    return this.ipVersion === 4 ? 'IPv4' : 'IPv6';
  }

  /** Sets the `port` of the port named `name` in the array at path `ports` to the hub's port; whether the object changed. */
  setNamedPort(obj, ports, name) {
    const index = obj.position(ports, (port) => isObject(port) && Object.hasOwn(port, 'name') && port.name === name);
    if (index === undefined) return false;
    return obj.update(`${ports}.${index}.port`, this.port);
  }
}
