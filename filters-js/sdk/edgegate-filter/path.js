// Paths into JSON values: dot-separated keys, where a number indexes an array
// (`spec.ports.0.port`). Members are found as own members only, so that `constructor` or
// `__proto__` in a path reads nothing a JSON object does not hold. Loops are written with
// indexes: the engine runs a component's code in its interpreter, where `for...of` and
// the array methods cost several times more.

import { isObject, put } from './json.js';

const INDEX = /^\+?[0-9]+$/;

/** The keys of a dot-separated path. */
export function keysOf(path) {
  if (typeof path !== 'string') throw new TypeError(`a path is a string, not ${typeof path}`);
  return path.split('.');
}

/** The index an array key names, or -1 when it names none of `items`. */
function indexIn(items, key) {
  if (!INDEX.test(key)) return -1;
  const index = Number(key);
  return index < items.length ? index : -1;
}

/** The value under `key` (an object's member, an array's item by index), or undefined. */
export function child(value, key) {
  if (isObject(value)) return Object.hasOwn(value, key) ? value[key] : undefined;
  if (Array.isArray(value)) {
    const index = indexIn(value, key);
    return index < 0 ? undefined : value[index];
  }
  return undefined;
}

/** The value below `value` at `keys`, or undefined. */
export function walk(value, keys) {
  for (let i = 0; i < keys.length; i++) {
    value = child(value, keys[i]);
    if (value === undefined) return undefined;
  }
  return value;
}

/**
 * Sets the value below `root` at `keys`, adding missing objects on the way (never array
 * items). Returns false, changing nothing, when the path runs through something that is
 * neither (a scalar, null) or past an array's end.
 */
export function setAt(root, keys, value) {
  const last = keys[keys.length - 1];
  // Checked first, so that a path that cannot be set adds no objects on its way.
  let parent = root;
  let missing = false;
  for (let i = 0; i < keys.length - 1; i++) {
    const key = keys[i];
    if (isObject(parent)) {
      if (!Object.hasOwn(parent, key)) {
        missing = true;
        break;
      }
      parent = parent[key];
    } else if (Array.isArray(parent) && indexIn(parent, key) >= 0) {
      parent = parent[indexIn(parent, key)];
    } else {
      return false;
    }
  }
  if (!missing && !isObject(parent) && !(Array.isArray(parent) && indexIn(parent, last) >= 0)) {
    return false;
  }
  parent = root;
  for (let i = 0; i < keys.length - 1; i++) {
    const key = keys[i];
    if (Array.isArray(parent)) {
      parent = parent[indexIn(parent, key)];
    } else {
      if (!Object.hasOwn(parent, key)) put(parent, key, {});
      parent = parent[key];
    }
  }
  if (Array.isArray(parent)) {
    parent[indexIn(parent, last)] = value;
  } else {
    put(parent, last, value);
  }
  return true;
}

/** Removes the member at `keys` from the object holding it; whether there was one, and its value. */
export function removeAt(root, keys) {
  const parent = walk(root, keys.slice(0, keys.length - 1));
  const last = keys[keys.length - 1];
  if (!isObject(parent) || !Object.hasOwn(parent, last)) return { removed: false, value: undefined };
  const value = parent[last];
  delete parent[last];
  return { removed: true, value };
}
