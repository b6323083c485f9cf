// The component side of the `edgegate:filter` world: `exportFilter` makes the functions a
// component exports, converting what the bindings pass to and from the SDK's types. This
// module imports the world's `host` interface, which only componentize-js provides: import it
// from the module a component is built from, never from one that tests load natively.

import * as imports from 'edgegate:filter/host@0.2.1';

import { FilterFailure, Runner, checkedManifest, describe } from './adapter.js';
import * as host from './host.js';
import { Context, Drop, Keep, Level, Verb } from './types.js';

/** The host's imports, as host.js calls them. */
const witBackend = {
  get: (r, namespace, name) => imports.get(r.group, r.version, r.resource, namespace, name),
  list: (r, namespace, selector) => imports.list(r.group, r.version, r.resource, namespace, selector),
  log: (level, message) => imports.log(level, message),
  logEnabled: (level) => imports.logEnabled(level),
  count: (name, delta) => imports.count(name, delta),
};

/** A verb as the WIT world spells it (`delete-collection`), and back. */
const toWitVerb = (verb) => (verb === Verb.DELETE_COLLECTION ? 'delete-collection' : verb);
const fromWitVerb = (verb) => (verb === 'delete-collection' ? Verb.DELETE_COLLECTION : verb);

const KEEP_WIT = { tag: 'keep' };
const DROP_WIT = { tag: 'drop' };

/** A decision as the bindings take it. */
function decisionToWit(decision) {
  if (decision instanceof Keep) return KEEP_WIT;
  if (decision instanceof Drop) return DROP_WIT;
  return { tag: 'replace', val: decision.data };
}

/**
 * Runs `call`; an exception is written to the gateway's log with its calls, then traps the
 * call, so that the host applies the filter's failure policy. (The engine would report it on
 * stderr, which a filter is not given: the trap itself says only `unreachable`.)
 */
function logged(call) {
  try {
    return call();
  } catch (error) {
    if (!(error instanceof FilterFailure)) host.log(Level.ERROR, `exception: ${describe(error)}`);
    throw error;
  }
}

/** Sends `console` lines to the gateway's log: `debug`, `info` (and `log`), `warn` and `error`. */
function consoleToLog() {
  const line = (level) => (...args) => {
    if (!host.logEnabled(level)) return;
    host.log(level, args.map((arg) => (typeof arg === 'string' ? arg : describeArg(arg))).join(' '));
  };
  for (const [method, level] of [
    ['debug', Level.DEBUG], ['log', Level.INFO], ['info', Level.INFO], ['warn', Level.WARN], ['error', Level.ERROR],
  ]) {
    globalThis.console[method] = line(level);
  }
}

/** A console argument as text: an Error with its calls, anything else as JSON. */
function describeArg(arg) {
  if (arg instanceof Error) return describe(arg);
  try {
    return JSON.stringify(arg, (_, v) => (typeof v === 'bigint' ? v.toString() : v)) ?? String(arg);
  } catch {
    return String(arg);
  }
}

/**
 * The functions a component of the `edgegate:filter` world exports, for the filter class
 * `FilterClass`. In the module componentize-js builds, write
 * `export const { manifest, configure, begin, filter, filterBatch } = exportFilter(MyFilter);`
 * @param {typeof import('./filter.js').Filter} FilterClass
 */
export function exportFilter(FilterClass) {
  host.useBackend(witBackend);
  consoleToLog();
  const runner = new Runner(FilterClass);
  return {
    manifest() {
      const manifest = logged(() => checkedManifest(FilterClass));
      return {
        name: manifest.name,
        version: manifest.version,
        matches: manifest.matches.map((m) => ({
          group: m.group,
          resources: [...m.resources],
          verbs: m.verbs.map(toWitVerb),
        })),
        components: [...manifest.components],
        priority: manifest.priority,
        configSchema: manifest.configSchema == null ? undefined : JSON.stringify(manifest.configSchema),
      };
    },

    configure(config) {
      const error = logged(() => runner.configure(config));
      // componentize-js returns a thrown string as the result's error.
      if (error !== undefined) throw error;
    },

    begin(ctx) {
      runner.context = new Context({ ...ctx, verb: fromWitVerb(ctx.verb) });
    },

    filter(object) {
      return decisionToWit(logged(() => runner.run(object)));
    },

    filterBatch(objects) {
      return logged(() => runner.runBatch(objects)).map(decisionToWit);
    },
  };
}
