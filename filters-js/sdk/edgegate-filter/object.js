// `KubeObject`: one Kubernetes object, parsed on first read, with the accessors filters use:
// identity, labels, annotations, and fields by path (see path.js). Named so as not to hide
// JavaScript's own `Object`.
//
// An object knows whether it was edited, as the Rust SDK's does: a setter or a removal that
// changed it, or a `...Mut` accessor that handed out a part of it to change (counted even
// when nothing is written through it). A setter that finds the value already there
// (`update`) and a removal that finds nothing edit nothing, so a kept object goes on as its
// original bytes. An edited object is encoded whole (json.js): the same JSON, not the same
// bytes.

import { encode, encodeAfter, isObject, parse, put, same } from './json.js';
import { child, keysOf, removeAt, setAt, walk } from './path.js';

/** The bytes are not JSON, or the JSON is not an object. */
export class ObjectError extends Error {
  name = 'ObjectError';
}

const decoder = new TextDecoder('utf-8', { fatal: true });
const encoder = new TextEncoder();
const KIND = ['kind'];
const API_VERSION = ['apiVersion'];
const NAME = ['metadata', 'name'];
const NAMESPACE = ['metadata', 'namespace'];
const RESOURCE_VERSION = ['metadata', 'resourceVersion'];
/** Characters a name may hold that JSON text could spell otherwise than as themselves. */
const ESCAPABLE = /["\\/\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

/** The JSON text of bytes; ObjectError when they are not UTF-8. */
function textOf(data) {
  try {
    return decoder.decode(data);
  } catch {
    throw new ObjectError('not JSON: not UTF-8');
  }
}

/** Bytes as a Uint8Array, from any typed array (of any realm) or an ArrayBuffer. */
function bytesOf(data) {
  if (data instanceof Uint8Array) return data;
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  const type = data === null ? 'null' : typeof data === 'object' ? data.constructor?.name ?? 'object' : typeof data;
  throw new ObjectError(`an object is made from JSON bytes or text, not ${type}`);
}

/** A Kubernetes object: its bytes, and its JSON value once a read needs it. */
export class KubeObject {
  /** @type {Uint8Array | undefined} */ #raw;
  /** @type {string | undefined} */ #text;
  /** @type {Record<string, any> | undefined} */ #value;
  #edited = false;
  /** Whether a part was handed out to change, which may have changed nothing. */
  #lent = false;

  /** An object from JSON bytes (or text), checked to open a JSON object and parsed on first read. */
  constructor(data) {
    if (typeof data === 'string') {
      this.#text = data;
      this.#raw = encoder.encode(data);
    } else {
      this.#raw = bytesOf(data);
    }
    const raw = this.#raw;
    let i = 0;
    // kube-apiserver's objects open with `{`: the loop runs only on other bytes.
    while (raw[i] === 0x20 || raw[i] === 0x09 || raw[i] === 0x0a || raw[i] === 0x0d) i++;
    if (raw[i] !== 0x7b) {
      let value;
      try {
        value = parse(this.#decoded());
      } catch (error) {
        if (error instanceof ObjectError) throw error;
        throw new ObjectError(`not JSON: ${error.message}`);
      }
      throw new ObjectError(`not a JSON object: ${Array.isArray(value) ? 'array' : value === null ? 'null' : typeof value}`);
    }
  }

  /** An object wrapping a JSON value, which must be a JSON object. */
  static fromValue(value) {
    if (!isObject(value)) throw new ObjectError('not a JSON object');
    const object = new KubeObject('{}');
    object.#raw = undefined;
    object.#text = undefined;
    object.#value = value;
    return object;
  }

  /** The JSON text, decoded from the bytes on first use. */
  #decoded() {
    this.#text ??= textOf(this.#raw);
    return this.#text;
  }

  // The whole value.

  /** The whole object, to read; change it only through the setters or `valueMut()`. */
  get value() {
    if (this.#value === undefined) {
      let value;
      try {
        value = parse(this.#decoded());
      } catch (error) {
        if (error instanceof ObjectError) throw error;
        throw new ObjectError(`the object does not parse whole: ${error.message}`);
      }
      if (!isObject(value)) throw new ObjectError('not a JSON object');
      this.#value = value;
    }
    return this.#value;
  }

  /** The whole object, to change; counted as an edit. */
  valueMut() {
    this.#edited = this.#lent = true;
    return this.value;
  }

  /** Whether the object may differ from what it was made from. */
  isEdited() {
    return this.#edited;
  }

  /** The value as JSON text, its integers beyond 2^53 as the original text spells them. */
  #encoded() {
    return this.#raw === undefined ? encode(this.value) : encodeAfter(this.value, this.#decoded());
  }

  /** The object as JSON bytes: its original bytes if it was not edited. */
  toBytes() {
    if (!this.#edited && this.#raw !== undefined) return this.#raw;
    return encoder.encode(this.#encoded());
  }

  /** The object as JSON bytes if it was edited and no longer reads as it came (what `KEEP` forwards), else undefined. */
  edits() {
    if (!this.#edited) return undefined;
    const text = this.#encoded();
    if (this.#raw !== undefined) {
      if (text === this.#decoded()) return undefined;
      // The setters mark only changes; a part handed out may have been left as it was.
      if (this.#lent && same(parse(this.#decoded()), this.#value)) return undefined;
    }
    return encoder.encode(text);
  }

  /** Whether `other` is an object with an equal JSON value. */
  equals(other) {
    return other instanceof KubeObject && same(this.value, other.value);
  }

  // Fields by path.

  /** Any field by path from the root (`metadata.ownerReferences.0.kind`), or undefined. */
  get(path) {
    return walk(this.value, keysOf(path));
  }

  /** Any field by path, to change in place; counted as an edit when there is one. */
  getMut(path) {
    const found = walk(this.value, keysOf(path));
    if (found !== undefined) this.#edited = this.#lent = true;
    return found;
  }

  /** Sets any field by path, adding missing objects (never array items); false, changing nothing, when it cannot. */
  set(path, value) {
    if (!setAt(this.value, keysOf(path), value)) return false;
    this.#edited = true;
    return true;
  }

  /** Sets a field as `set` does, unless it already holds an equal value; whether it changed. */
  update(path, value) {
    return this.#updateKeys(keysOf(path), value);
  }

  /** `update` by keys. */
  #updateKeys(keys, value) {
    const found = walk(this.value, keys);
    if (found !== undefined && same(found, value)) return false;
    if (!setAt(this.value, keys, value)) return false;
    this.#edited = true;
    return true;
  }

  /** Removes the member at a path and returns its value; undefined, changing nothing, when there is none. */
  remove(path) {
    const { removed, value } = removeAt(this.value, keysOf(path));
    if (removed) this.#edited = true;
    return value;
  }

  /** Keeps only the items of the array in top-level field `key` that `keep` accepts; whether any was removed. */
  retainItems(key, keep) {
    const items = walk(this.value, [key]);
    if (!Array.isArray(items)) return false;
    const kept = [];
    for (let i = 0; i < items.length; i++) if (keep(items[i])) kept.push(items[i]);
    if (kept.length === items.length) return false;
    items.length = kept.length;
    for (let i = 0; i < kept.length; i++) items[i] = kept[i];
    this.#edited = true;
    return true;
  }

  /** The index of the first item of the array at `path` that `accept` accepts, or undefined. */
  position(path, accept) {
    const items = this.get(path);
    if (!Array.isArray(items)) return undefined;
    for (let i = 0; i < items.length; i++) if (accept(items[i])) return i;
    return undefined;
  }

  /** A field of `spec` by path (`clusterIP`, `ports.0.port`). */
  spec(path) {
    return walk(child(this.value, 'spec'), keysOf(path));
  }

  /** A field of `spec` by path, to change in place; counted as an edit. */
  specMut(path) {
    return this.getMut(`spec.${path}`);
  }

  /** Sets a field of `spec` by path, adding missing objects on the way. */
  setSpec(path, value) {
    return this.set(`spec.${path}`, value);
  }

  /** A field of `status` by path. */
  status(path) {
    return walk(child(this.value, 'status'), keysOf(path));
  }

  /** A field of `status` by path, to change in place; counted as an edit. */
  statusMut(path) {
    return this.getMut(`status.${path}`);
  }

  /** Sets a field of `status` by path, adding missing objects on the way. */
  setStatus(path, value) {
    return this.set(`status.${path}`, value);
  }

  // Identity.

  /** The string at `keys`, or undefined. */
  #string(keys) {
    const found = walk(this.value, keys);
    return typeof found === 'string' ? found : undefined;
  }

  /** Sets a string at `keys`, putting an object in place of anything else on the way (`"labels": null`). */
  #setString(keys, value) {
    if (typeof value !== 'string') throw new TypeError(`${keys.join('.')} is set to a string, not ${typeof value}`);
    let parent = this.value;
    for (let i = 0; i < keys.length - 1; i++) {
      if (!Object.hasOwn(parent, keys[i]) || !isObject(parent[keys[i]])) {
        put(parent, keys[i], {});
        this.#edited = true;
      }
      parent = parent[keys[i]];
    }
    const last = keys[keys.length - 1];
    if (Object.hasOwn(parent, last) && parent[last] === value) return;
    put(parent, last, value);
    this.#edited = true;
  }

  /** `apiVersion`, or undefined. */
  get apiVersion() {
    return this.#string(API_VERSION);
  }

  /** `kind`, or undefined; settable. */
  get kind() {
    return this.#string(KIND);
  }

  set kind(kind) {
    this.#setString(['kind'], kind);
  }

  /** `metadata.name`, or undefined; settable. */
  get name() {
    return this.#string(NAME);
  }

  set name(name) {
    this.#setString(['metadata', 'name'], name);
  }

  /** `metadata.namespace`, or undefined; settable. */
  get namespace() {
    return this.#string(NAMESPACE);
  }

  set namespace(namespace) {
    this.#setString(['metadata', 'namespace'], namespace);
  }

  /** `metadata.resourceVersion` (which a filter must never change), or undefined. */
  get resourceVersion() {
    return this.#string(RESOURCE_VERSION);
  }

  /** Whether this is the object `namespace/name`; unparsed bytes that cannot hold both strings answer without a parse. */
  isNamed(namespace, name) {
    if (this.#value === undefined && !this.#mayHold(namespace, name)) return false;
    return this.namespace === namespace && this.name === name;
  }

  /** Whether the unparsed text may hold the JSON strings `a` and `b` (false only when it cannot). */
  #mayHold(a, b) {
    if (typeof a !== 'string' || typeof b !== 'string' || ESCAPABLE.test(a) || ESCAPABLE.test(b)) return true;
    const json = this.#decoded();
    // indexOf, not includes: the engine's includes is written in JavaScript, indexOf is native.
    if (json.indexOf('\\u') !== -1 || json.indexOf('\\/') !== -1) return true;
    return json.indexOf(`"${a}"`) !== -1 && json.indexOf(`"${b}"`) !== -1;
  }

  // Labels and annotations.

  /** The string members of the object at `keys`, as a new object. */
  #strings(keys) {
    const found = walk(this.value, keys);
    if (!isObject(found)) return {};
    return Object.fromEntries(Object.entries(found).filter(([, value]) => typeof value === 'string'));
  }

  /** Removes the member at `keys`; its value if it was a string. */
  #removeString(keys) {
    const { removed, value } = removeAt(this.value, keys);
    if (removed) this.#edited = true;
    return typeof value === 'string' ? value : undefined;
  }

  /** The string member `key` of the object at `keys`, or undefined. */
  #member(keys, key) {
    const map = walk(this.value, keys);
    const found = isObject(map) && Object.hasOwn(map, key) ? map[key] : undefined;
    return typeof found === 'string' ? found : undefined;
  }

  /** One label's value, or undefined. */
  label(key) {
    return this.#member(['metadata', 'labels'], key);
  }

  /** All labels (string values only), as a new object. */
  labels() {
    return this.#strings(['metadata', 'labels']);
  }

  /** Sets a label (an edit only when it had another value). */
  setLabel(key, value) {
    this.#setString(['metadata', 'labels', key], value);
  }

  /** Removes a label, returning its value (undefined when it was not a string); no edit when there was none. */
  removeLabel(key) {
    return this.#removeString(['metadata', 'labels', key]);
  }

  /** One annotation's value, or undefined. */
  annotation(key) {
    return this.#member(['metadata', 'annotations'], key);
  }

  /** All annotations (string values only), as a new object. */
  annotations() {
    return this.#strings(['metadata', 'annotations']);
  }

  /** Sets an annotation (an edit only when it had another value). */
  setAnnotation(key, value) {
    this.#setString(['metadata', 'annotations', key], value);
  }

  /** Removes an annotation, returning its value (undefined when it was not a string); no edit when there was none. */
  removeAnnotation(key) {
    return this.#removeString(['metadata', 'annotations', key]);
  }
}
