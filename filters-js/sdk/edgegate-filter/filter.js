// The one class a filter derives from.

import { KEEP } from './types.js';

/** A config the filter cannot be built from: the gateway refuses the generation being loaded. */
export class ConfigError extends Error {
  name = 'ConfigError';
}

/**
 * A filter: it says what it is, builds itself from its config, and decides about objects.
 * Derive from it, implement `static manifest()` and `filter`, and export the class with
 * `exportFilter` (guest.js). The gateway keeps several instances of a filter and replaces
 * one after it traps, so a filter must not rely on state kept between calls.
 */
export class Filter {
  /** What the filter is and what it applies to (a `Manifest`); read once when it is loaded. */
  static manifest() {
    throw new Error(`${this.name} has no static manifest()`);
  }

  /**
   * Builds the filter from its config: the JSON the gateway has already checked against
   * the manifest's schema (`{}` when none is given). By default `new this(config)`. Throw
   * `ConfigError` (or a `TypeError` or `RangeError`) to refuse it.
   * @param {Record<string, any>} config
   * @returns {Filter}
   */
  static fromConfig(config) {
    return new this(config);
  }

  /**
   * Decides about one object: a list item, a watch event's object or a single GET's body.
   * `KEEP` passes the object on as the filter left it: edits made to `obj` are forwarded,
   * and an object nothing edited goes on as its original bytes.
   * @param {import('./types.js').Context} ctx
   * @param {import('./object.js').KubeObject} obj
   * @returns {import('./types.js').Decision}
   */
  filter(ctx, obj) {
    return KEEP;
  }

  /** Decides about several objects of one response, in order; by default one at a time. */
  filterBatch(ctx, objects) {
    return objects.map((obj) => this.filter(ctx, obj));
  }
}
