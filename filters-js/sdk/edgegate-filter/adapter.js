// Runs a `Filter` behind the world's exports: builds it from its config, parses each object
// and turns decisions into what the host receives. The component's exports (guest.js) and
// the test harness (testing.js) both go through here, so tests exercise the same path.

import { ConfigError } from './filter.js';
import * as host from './host.js';
import { KubeObject, ObjectError } from './object.js';
import { isObject, parseConfig } from './json.js';
import { Drop, KEEP, Keep, Level, Replace, VERBS } from './types.js';

/** An error the SDK has already written to the gateway's log before throwing it. */
export class FilterFailure extends Error {
  name = 'FilterFailure';
}

/** Something only a host bug or a broken filter causes: logs why, then throws, so that the call traps. */
export function fail(message) {
  host.log(Level.ERROR, message);
  throw new FilterFailure(message);
}

/** One instance's filter (undefined until configured) and the context last begun. */
export class Runner {
  /** A runner of the filter class `FilterClass`. */
  constructor(FilterClass) {
    this.FilterClass = FilterClass;
    this.filter = undefined;
    /** @type {import('./types.js').Context | undefined} */
    this.context = undefined;
  }

  /** Builds the filter from the config's JSON text; returns why it cannot be, or undefined. */
  configure(config) {
    let value;
    try {
      value = config.trim() === '' ? {} : parseConfig(config);
    } catch (error) {
      return `config is not JSON: ${error.message}`;
    }
    if (!isObject(value)) return 'bad config: not a JSON object';
    let filter;
    try {
      filter = this.FilterClass.fromConfig(value);
    } catch (error) {
      if (error instanceof ConfigError || error instanceof TypeError || error instanceof RangeError) {
        return `bad config: ${error.message}`;
      }
      throw error;
    }
    if (filter === null || typeof filter !== 'object' || typeof filter.filter !== 'function') {
      fail(`${this.FilterClass.name}.fromConfig returned no filter`);
    }
    this.filter = filter;
    return undefined;
  }

  /** Fails the call unless the filter was configured and a context begun. */
  #ready() {
    if (this.filter === undefined) fail('filter called before configure');
    if (this.context === undefined) fail('filter called before begin');
  }

  /** Decides about one object (JSON bytes); `KEEP` means its original bytes. */
  run(data) {
    this.#ready();
    const obj = parsed(data);
    return output(this.filter.filter(this.context, obj), obj);
  }

  /** Decides about several objects; one output per object, in order. */
  runBatch(objects) {
    this.#ready();
    const all = new Array(objects.length);
    for (let i = 0; i < objects.length; i++) all[i] = parsed(objects[i]);
    const decisions = this.filter.filterBatch(this.context, all);
    if (!Array.isArray(decisions) || decisions.length !== all.length) {
      fail(`filterBatch returned ${describeValue(decisions)} for ${all.length} objects, not one decision each`);
    }
    for (let i = 0; i < all.length; i++) decisions[i] = output(decisions[i], all[i]);
    return decisions;
  }
}

/** An object from the bytes the host passed; fails the call when they are no JSON object. */
function parsed(data) {
  try {
    return new KubeObject(data);
  } catch (error) {
    if (error instanceof ObjectError) fail(`the object is not a Kubernetes object: ${error.message}`);
    throw error;
  }
}

/** A decision as the host receives it: `KEEP` of an edited object forwards its edits. */
export function output(decision, obj) {
  if (decision instanceof Keep) {
    const edits = obj.edits();
    return edits === undefined ? KEEP : new Replace(edits);
  }
  if (decision instanceof Drop || decision instanceof Replace) return decision;
  return fail(`the filter returned ${describeValue(decision)}, not KEEP, DROP or a Replace`);
}

/** A short description of a value in a message. */
function describeValue(value) {
  if (value === null || value === undefined) return String(value);
  if (typeof value.then === 'function') return 'a Promise (a filter decides synchronously)';
  if (Array.isArray(value)) return `${value.length} items`;
  return typeof value === 'object' ? `a ${value.constructor?.name ?? 'object'}` : `${typeof value} ${String(value)}`;
}

/** The manifest of `FilterClass`, checked to have the types the WIT world's record takes. */
export function checkedManifest(FilterClass) {
  const manifest = FilterClass.manifest();
  const problem = manifestProblem(manifest);
  if (problem !== undefined) fail(`${FilterClass.name}.manifest(): ${problem}`);
  return manifest;
}

/** What is wrong with a manifest, or undefined. */
function manifestProblem(manifest) {
  const strings = (value) => Array.isArray(value) && value.every((s) => typeof s === 'string');
  if (typeof manifest?.name !== 'string' || typeof manifest.version !== 'string') {
    return 'name and version are not strings';
  }
  if (!Array.isArray(manifest.matches) || !manifest.matches.every((m) => typeof m?.group === 'string' && strings(m.resources) && strings(m.verbs))) {
    return 'matches are not {group, resources, verbs}';
  }
  if (manifest.matches.some((m) => m.verbs.some((verb) => !VERBS.includes(verb)))) {
    return `a verb is not one of ${VERBS.join(', ')}`;
  }
  if (!strings(manifest.components)) return 'components are not strings';
  if (manifest.configSchema != null && !isObject(manifest.configSchema)) return 'configSchema is not an object';
  if (!Number.isInteger(manifest.priority) || manifest.priority < -(2 ** 31) || manifest.priority >= 2 ** 31) {
    return 'priority is not a 32-bit integer';
  }
  return undefined;
}

/** Frames of the exports' plumbing: componentize-js's bindings and guest.js. */
const PLUMBING = /\/initializer\.js:[0-9]+:[0-9]+$|edgegate-filter\/guest\.js:[0-9]+:[0-9]+$/;

/** An exception and where it was thrown, innermost call last, for the gateway's log. */
export function describe(error) {
  if (!(error instanceof Error)) return `${typeof error} thrown: ${String(error)}`;
  const calls = String(error.stack ?? '')
    .split('\n')
    .filter((line) => line.trim() !== '' && !PLUMBING.test(line))
    .map((line) => {
      // SpiderMonkey writes a frame as `name@file:line:column`.
      const at = line.lastIndexOf('@');
      if (at < 0) return line.trim();
      return `${line.slice(0, at) || '(top level)'} (${line.slice(at + 1).replace(/:[0-9]+$/, '')})`;
    })
    .reverse();
  return `${error.name}: ${error.message}${calls.length > 0 ? `; in ${calls.join(' > ')}` : ''}`;
}
