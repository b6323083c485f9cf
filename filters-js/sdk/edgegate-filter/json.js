// JSON as filters read and write it. Objects are read by the engine's own JSON.parse, whose
// numbers are doubles: Kubernetes writes int64 and uint64 fields as plain integers, which
// beyond 2^53 a double holds only approximately. So that an object the filter edits does
// not carry such approximations on, `encodeAfter` writes the integers of the text it was
// read from back digit for digit, where the filter left them; a slower reader
// (`parseExact`) reads them as BigInt, and it is run only on the text of an edited object
// with a run of 16 digits in it.

/** A run of digits that may spell an integer a double cannot hold. */
const LONG_NUMBER = /[0-9]{16}/;
const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;
const SPACE = /[ \t\n\r]*/y;

/** JSON text as a value, by the engine's JSON.parse. */
export function parse(text) {
  return JSON.parse(text);
}

/** JSON text as a value, strictly; integers beyond `Number.MAX_SAFE_INTEGER` as BigInt. */
export function parseExact(text) {
  if (!LONG_NUMBER.test(text)) return JSON.parse(text);
  const reader = new Reader(text);
  const value = reader.value();
  reader.end();
  return value;
}

/**
 * `value`, which JSON.parse read from `text` and a filter may have edited since, as JSON
 * text: the integers of `text` a double cannot hold are written as `text` spells them,
 * wherever `value` still holds the double JSON.parse made of them.
 */
export function encodeAfter(value, text) {
  if (!LONG_NUMBER.test(text)) return encode(value);
  let copy;
  try {
    copy = structuredClone(value);
  } catch {
    return encode(value); // a value JSON cannot hold whole (a function) holds no such integer either
  }
  return encode(restore(copy, parseExact(text)));
}

/** `edited` with the BigInts of `exact` back where it holds what a double made of them. */
function restore(edited, exact) {
  if (typeof exact === 'bigint') return Number(exact) === edited ? exact : edited;
  if (Array.isArray(exact)) {
    if (!Array.isArray(edited)) return edited;
    const n = Math.min(exact.length, edited.length);
    for (let i = 0; i < n; i++) edited[i] = restore(edited[i], exact[i]);
  } else if (isObject(exact) && isObject(edited)) {
    for (const key of Object.keys(exact)) {
      if (Object.hasOwn(edited, key)) put(edited, key, restore(edited[key], exact[key]));
    }
  }
  return edited;
}

/**
 * A filter's config as a value. Its numbers spelled with a fraction or an exponent that
 * hold an integer (`443.0`, `1e3`) are `Number` objects, not numbers, so that
 * `Number.isInteger` refuses them as the Rust SDK's integer fields do; they compute as
 * numbers.
 */
export function parseConfig(text) {
  const reader = new Reader(text, true);
  const value = reader.value();
  reader.end();
  return value;
}

/** A value as compact JSON text, keys in their order, non-ASCII as is, BigInt as digits. */
export function encode(value) {
  try {
    return JSON.stringify(value);
  } catch (error) {
    // JSON.stringify refuses BigInt (and cycles, which `write` refuses too).
    if (!(error instanceof TypeError)) throw error;
  }
  const parts = [];
  write(value, parts, new Set());
  return parts.join('');
}

/** Whether `value` is a JSON object: not null, not an array. */
export function isObject(value) {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Sets `object[key]` as an own member, even for the key `__proto__`. */
export function put(object, key, value) {
  if (key === '__proto__') {
    Object.defineProperty(object, key, { value, writable: true, enumerable: true, configurable: true });
  } else {
    object[key] = value;
  }
}

/** Whether two JSON values are equal as JSON values: members in any order, no coercion. */
export function same(a, b) {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!same(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  for (let i = 0; i < keys.length; i++) {
    if (!Object.hasOwn(b, keys[i]) || !same(a[keys[i]], b[keys[i]])) return false;
  }
  return true;
}

/** Writes `value` as JSON into `parts`, as JSON.stringify would, BigInt as its digits. */
function write(value, parts, open) {
  if (typeof value === 'bigint') {
    parts.push(value.toString());
    return;
  }
  if (typeof value !== 'object' || value === null || typeof value.toJSON === 'function') {
    parts.push(JSON.stringify(value) ?? 'null');
    return;
  }
  if (open.has(value)) throw new TypeError('cyclic object value');
  open.add(value);
  if (Array.isArray(value)) {
    parts.push('[');
    value.forEach((item, i) => {
      if (i > 0) parts.push(',');
      write(item, parts, open);
    });
    parts.push(']');
  } else {
    parts.push('{');
    let first = true;
    for (const [key, item] of Object.entries(value)) {
      if (item === undefined || typeof item === 'function' || typeof item === 'symbol') continue;
      parts.push(first ? '' : ',', JSON.stringify(key), ':');
      first = false;
      write(item, parts, open);
    }
    parts.push('}');
  }
  open.delete(value);
}

/** A strict JSON reader over text, for the text JSON.parse would round. */
class Reader {
  constructor(text, boxFloats = false) {
    this.text = text;
    this.at = 0;
    this.boxFloats = boxFloats;
  }

  fail(what) {
    throw new SyntaxError(`JSON: ${what} at position ${this.at}`);
  }

  space() {
    SPACE.lastIndex = this.at;
    SPACE.test(this.text);
    this.at = SPACE.lastIndex;
  }

  end() {
    this.space();
    if (this.at !== this.text.length) this.fail('unexpected text');
  }

  value() {
    this.space();
    const c = this.text[this.at];
    if (c === '{') return this.object();
    if (c === '[') return this.array();
    if (c === '"') return this.string();
    for (const [word, value] of [['true', true], ['false', false], ['null', null]]) {
      if (this.text.startsWith(word, this.at)) {
        this.at += word.length;
        return value;
      }
    }
    return this.number();
  }

  number() {
    NUMBER.lastIndex = this.at;
    const found = NUMBER.exec(this.text);
    if (found === null) this.fail('unexpected character');
    this.at = NUMBER.lastIndex;
    const number = Number(found[0]);
    const integer = found[1] === undefined && found[2] === undefined;
    if (integer) return Number.isSafeInteger(number) ? number : BigInt(found[0]);
    return this.boxFloats && Number.isInteger(number) ? new Number(number) : number;
  }

  string() {
    const start = this.at;
    let i = start + 1;
    for (;;) {
      const quote = this.text.indexOf('"', i);
      if (quote < 0) this.fail('unterminated string');
      let slashes = 0;
      while (this.text[quote - 1 - slashes] === '\\') slashes++;
      i = quote + 1;
      if (slashes % 2 === 0) break;
    }
    this.at = i;
    // The engine unescapes the string and refuses what JSON does not allow in one.
    return JSON.parse(this.text.slice(start, i));
  }

  array() {
    const items = [];
    this.at++;
    this.space();
    if (this.text[this.at] === ']') {
      this.at++;
      return items;
    }
    for (;;) {
      items.push(this.value());
      this.space();
      const c = this.text[this.at++];
      if (c === ']') return items;
      if (c !== ',') this.fail('expected , or ]');
    }
  }

  object() {
    const object = {};
    this.at++;
    this.space();
    if (this.text[this.at] === '}') {
      this.at++;
      return object;
    }
    for (;;) {
      this.space();
      if (this.text[this.at] !== '"') this.fail('expected a string key');
      const key = this.string();
      this.space();
      if (this.text[this.at++] !== ':') this.fail('expected :');
      put(object, key, this.value());
      this.space();
      const c = this.text[this.at++];
      if (c === '}') return object;
      if (c !== ',') this.fail('expected , or }');
    }
  }
}
