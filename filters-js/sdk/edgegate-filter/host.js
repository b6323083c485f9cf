// What the gateway grants a filter: read-only lookups of the objects it knows (served from
// its informers and cache, so they work offline), logging and counters. Nothing else.
//
// In a component these call the world's `host` imports (guest.js installs them); natively
// they are served by the `testing.Harness` that is filtering, and do nothing without one.

import { KubeObject, ObjectError } from './object.js';
import { LEVELS } from './types.js';

const MAX_U64 = 2n ** 64n - 1n;

/**
 * Where the calls go: the component's imports, or a test's fake host. Objects travel as
 * JSON bytes; `count`'s delta is a BigInt.
 * @typedef {{
 *   get(resource: import('./types.js').Resource, namespace: string | undefined, name: string): Uint8Array | undefined,
 *   list(resource: import('./types.js').Resource, namespace: string | undefined, selector: string): Uint8Array[],
 *   log(level: string, message: string): void,
 *   logEnabled(level: string): boolean,
 *   count(name: string, delta: bigint): void,
 * }} Backend
 */

/** @type {Backend} The backend outside a component and a harness: knows nothing, writes nothing. */
const NOTHING = {
  get: () => undefined,
  list: () => [],
  log: () => {},
  logEnabled: () => false,
  count: () => {},
};

let backend = NOTHING;

/** Makes `next` the backend of the calls that follow and returns the one it replaces. */
export function useBackend(next) {
  const previous = backend;
  backend = next ?? NOTHING;
  return previous;
}

/** An object from bytes a lookup returned, or undefined when they are not a JSON object. */
function objectOf(data) {
  try {
    const object = new KubeObject(data);
    void object.value; // parsed now, so that what cannot be is left out
    return object;
  } catch (error) {
    if (error instanceof ObjectError) return undefined;
    throw error;
  }
}

/** One object of `resource` by namespace (undefined when cluster-scoped) and name; undefined if the gateway does not know it. */
export function get(resource, namespace, name) {
  const data = backend.get(resource, namespace ?? undefined, name);
  return data === undefined || data === null ? undefined : objectOf(data);
}

/** The objects of `resource` (in one namespace, or all with undefined) whose labels match a selector (`app=web,tier!=db`; empty matches all). */
export function list(resource, namespace = undefined, labelSelector = '') {
  return backend.list(resource, namespace ?? undefined, labelSelector).map(objectOf).filter((o) => o !== undefined);
}

/** Checks a level is one of `Level`'s values. */
function checked(level) {
  if (!LEVELS.includes(level)) throw new TypeError(`${String(level)} is not a Level`);
  return level;
}

/** Writes a line to the gateway's log, tagged with the filter's name. */
export function log(level, message) {
  backend.log(checked(level), String(message));
}

/** Whether `log` at `level` would write a line now: check it before building a costly message. */
export function logEnabled(level) {
  return backend.logEnabled(checked(level));
}

/** Adds `delta` (a non-negative integer, 1 by default) to the counter `name`, exported as a metric. */
export function count(name, delta = 1) {
  const value = typeof delta === 'bigint' ? delta : Number.isSafeInteger(delta) ? BigInt(delta) : -1n;
  if (value < 0n || value > MAX_U64) throw new RangeError(`count: ${String(delta)} is not an integer of 0 to 2^64-1`);
  backend.count(String(name), value);
}
