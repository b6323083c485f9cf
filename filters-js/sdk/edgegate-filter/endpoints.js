// The endpoints of a Service in its three shapes (EndpointSlice v1 and v1beta1, core v1
// Endpoints), each endpoint with the node it runs on, pruned by that node.
//
// The shape comes from the request, not from the object: the items of a JSON list carry no
// `apiVersion` or `kind`.

import { isObject } from './json.js';

/** The label (and v1beta1 topology key) that names a node. */
export const HOSTNAME_LABEL = 'kubernetes.io/hostname';

/** Address lists of an Endpoints subset. */
const ADDRESS_LISTS = ['addresses', 'notReadyAddresses'];

/** A member of a JSON object if it is a string, else undefined. */
function stringAt(object, key) {
  return isObject(object) && Object.hasOwn(object, key) && typeof object[key] === 'string' ? object[key] : undefined;
}

/** Which shape of endpoint object a request serves: `EndpointsKind.SLICE_V1`, `SLICE_V1BETA1` or `ENDPOINTS`. */
export class EndpointsKind {
  /** A shape by its API version (`discovery.k8s.io/v1`, `discovery.k8s.io/v1beta1`, `v1`). */
  constructor(apiVersion) {
    this.apiVersion = apiVersion;
    Object.freeze(this);
  }

  /** The shape a request's objects have, from its group, version and resource; undefined for anything else. */
  static of(ctx) {
    return KINDS.get(`${ctx.group}/${ctx.version}/${ctx.resource}`);
  }

  /** The three shapes. */
  static all() {
    return [EndpointsKind.SLICE_V1, EndpointsKind.SLICE_V1BETA1, EndpointsKind.ENDPOINTS];
  }

  /** Whether this is an EndpointSlice shape. */
  get isSlice() {
    return this !== EndpointsKind.ENDPOINTS;
  }

  /** The node an endpoint (a slice's endpoint or an Endpoints address) runs on, or undefined. */
  nodeOf(endpoint) {
    if (!isObject(endpoint)) return undefined;
    const nodeName = stringAt(endpoint, 'nodeName');
    if (this === EndpointsKind.ENDPOINTS) return nodeName;
    const field = this === EndpointsKind.SLICE_V1BETA1 ? 'topology' : 'deprecatedTopology';
    const hostname = Object.hasOwn(endpoint, field) ? stringAt(endpoint[field], HOSTNAME_LABEL) : undefined;
    // v1beta1's topology first; v1's deprecated topology only when nodeName is absent.
    if (this === EndpointsKind.SLICE_V1BETA1) return hostname ?? nodeName;
    return nodeName ?? hostname;
  }

  /**
   * Keeps only the endpoints whose node `keep` accepts; endpoints with no node are removed
   * too, as they cannot be placed. An Endpoints subset left with no address is removed; a
   * slice left with no endpoint keeps an empty list (the object stays, so that clients learn
   * its endpoints are gone). Returns whether anything was removed.
   */
  retainByNode(obj, keep) {
    const accept = (endpoint) => {
      const node = this.nodeOf(endpoint);
      return node !== undefined && keep(node);
    };
    if (this.isSlice) return obj.retainItems('endpoints', accept);
    const subsets = obj.get('subsets');
    if (!Array.isArray(subsets)) return false;
    const pruned = subsets.map((subset) => prunedSubset(subset, accept));
    const kept = pruned.filter(hasAddresses);
    if (pruned.every((subset, i) => subset === subsets[i]) && kept.length === subsets.length) return false;
    obj.set('subsets', kept);
    return true;
  }
}

EndpointsKind.SLICE_V1 = new EndpointsKind('discovery.k8s.io/v1');
EndpointsKind.SLICE_V1BETA1 = new EndpointsKind('discovery.k8s.io/v1beta1');
EndpointsKind.ENDPOINTS = new EndpointsKind('v1');
Object.freeze(EndpointsKind);

const KINDS = new Map([
  ['discovery.k8s.io/v1/endpointslices', EndpointsKind.SLICE_V1],
  ['discovery.k8s.io/v1beta1/endpointslices', EndpointsKind.SLICE_V1BETA1],
  ['/v1/endpoints', EndpointsKind.ENDPOINTS],
]);

/** A subset with both address lists pruned, a list that becomes empty removed (the API omits empty lists); the subset itself when nothing is removed. */
function prunedSubset(subset, accept) {
  if (!isObject(subset)) return subset;
  let changed;
  for (const key of ADDRESS_LISTS) {
    const addresses = Object.hasOwn(subset, key) ? subset[key] : undefined;
    if (!Array.isArray(addresses)) continue;
    const kept = addresses.filter(accept);
    if (kept.length === addresses.length) continue;
    changed ??= { ...subset };
    if (kept.length > 0) changed[key] = kept;
    else delete changed[key];
  }
  return changed ?? subset;
}

/** Whether a subset has an address, ready or not. */
function hasAddresses(subset) {
  return isObject(subset) && ADDRESS_LISTS.some((key) => Array.isArray(subset[key]) && subset[key].length > 0);
}
