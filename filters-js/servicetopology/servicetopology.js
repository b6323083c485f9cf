// `servicetopology`: shows node clients only the endpoints of a Service that are near enough,
// as the Service's `openyurt.io/topologyKeys` annotation asks: `kubernetes.io/hostname` keeps
// the endpoints on this node; `openyurt.io/nodepool` or `kubernetes.io/zone` keeps those in
// this node's pool (this node alone when it is in no pool). A Service without the annotation,
// or unknown to the gateway, keeps all its endpoints. An object left with no endpoints is
// still sent, so clients drop the old ones.
//
// The JavaScript port of filters/servicetopology (as filters-py ports it); it takes no config.

import { Filter, KEEP, Level, Manifest, NO_CONFIG, Verb, host } from '../sdk/edgegate-filter/index.js';
import { EndpointsKind } from '../sdk/edgegate-filter/endpoints.js';
import { members } from '../sdk/edgegate-filter/pool.js';
import { serviceName, serviceOf } from '../sdk/edgegate-filter/service.js';
import { Topology } from '../sdk/edgegate-filter/topology.js';

/**
 * After the filters that drop whole Services (which spares pruning what is dropped anyway)
 * and before those that rewrite endpoints to point at the gateway, whose endpoint has no
 * node and would be pruned.
 */
const PRIORITY = 30;

/**
 * What one call looks up in the gateway's view, each thing once: a list of a thousand slices
 * asks for its Services and its pool's members once, not a thousand times.
 */
export class Lookups {
  /** No lookup made yet. */
  constructor() {
    /** @type {Map<string, Topology | undefined>} by `namespace/name` */
    this.topologies = new Map();
    /** @type {Map<string, Set<string> | undefined>} by pool */
    this.poolMembers = new Map();
    this.warned = false;
  }

  /** The topology the Service of `obj` (an endpoint object of `kind`) asks for. */
  topology(kind, obj) {
    const namespace = obj.namespace;
    const name = serviceName(kind, obj);
    if (namespace === undefined || name === undefined) return undefined;
    const key = `${namespace}/${name}`;
    if (!this.topologies.has(key)) {
      const service = serviceOf(kind, obj);
      this.topologies.set(key, service === undefined ? undefined : Topology.of(service));
    }
    return this.topologies.get(key);
  }

  /** The nodes of pool `name`, if the gateway knows any. */
  members(name) {
    if (!this.poolMembers.has(name)) this.poolMembers.set(name, members(name));
    return this.poolMembers.get(name);
  }

  /** Logs a warning, unless this call has logged one already. */
  warnOnce(message) {
    if (this.warned) return;
    this.warned = true;
    host.log(Level.WARN, message);
  }
}

/** The filter. */
export default class ServiceTopology extends Filter {
  /** What the filter is: the proxies' lists and watches of slices and Endpoints. */
  static manifest() {
    return new Manifest('servicetopology', '0.1.0', {
      matches: [
        { group: 'discovery.k8s.io', resources: ['endpointslices'], verbs: [Verb.LIST, Verb.WATCH] },
        { group: '', resources: ['endpoints'], verbs: [Verb.LIST, Verb.WATCH] },
      ],
      components: ['kube-proxy', 'coredns', 'nginx-ingress-controller'],
      priority: PRIORITY,
      configSchema: NO_CONFIG,
    });
  }

  /** Prunes one object's endpoints. */
  filter(ctx, obj) {
    return prune(ctx, obj, new Lookups());
  }

  /** Prunes the objects of one list, looking each Service and the pool up once. */
  filterBatch(ctx, objects) {
    const lookups = new Lookups();
    return objects.map((obj) => prune(ctx, obj, lookups));
  }
}

/** Removes the endpoints of `obj` that its Service's topology puts out of reach; always `KEEP`. */
export function prune(ctx, obj, lookups) {
  const kind = EndpointsKind.of(ctx);
  if (kind === undefined) return KEEP;
  const topology = lookups.topology(kind, obj);
  if (topology === undefined) return KEEP;
  const node = ctx.nodeName;
  const pool = ctx.nodePool || undefined;
  let removed;
  if (topology === Topology.POOL && pool !== undefined) {
    const inPool = lookups.members(pool);
    if (inPool === undefined) {
      // All endpoints beat none while the gateway's view of the pool is missing.
      lookups.warnOnce(`no NodePool ${pool} and no node labelled for it: endpoints left unfiltered`);
      host.count('pool-unknown', 1);
      return KEEP;
    }
    // This node is in the pool even while the NodePool's status has not caught up.
    removed = kind.retainByNode(obj, (n) => n === node || inPool.has(n));
  } else {
    // A node in no pool keeps to itself, as in YurtHub.
    removed = kind.retainByNode(obj, (n) => n === node);
  }
  if (removed) {
    host.count('pruned', 1);
    if (host.logEnabled(Level.DEBUG)) {
      host.log(Level.DEBUG, `pruned the endpoints of ${obj.namespace}/${obj.name} to ${topology.name} topology`);
    }
  }
  return KEEP;
}
