// The member nodes of a node pool, from the gateway's view of the cluster.

import * as host from './host.js';
import { NODES, isLabelValue } from './kube.js';
import { Resource } from './types.js';

/** The label OpenYurt puts on a node to place it in a pool. */
export const NODE_POOL_LABEL = 'apps.openyurt.io/nodepool';
/** NodePools, in the version looked up. */
export const NODE_POOLS = new Resource('apps.openyurt.io', 'v1beta1', 'nodepools');

/**
 * The nodes of `pool` (a Set of names): the `status.nodes` of the NodePool `pool`, or, when
 * that names none, the nodes labelled `apps.openyurt.io/nodepool=<pool>`. Undefined when
 * neither knows a member: the gateway has not seen the pool, which is not an empty one.
 */
export function members(pool) {
  const listed = host.get(NODE_POOLS, undefined, pool)?.status('nodes');
  if (Array.isArray(listed)) {
    const fromPool = new Set(listed.filter((node) => typeof node === 'string'));
    if (fromPool.size > 0) return fromPool;
  }
  // A name that is not a label value would make the selector fail to parse (a trap).
  if (!isLabelValue(pool)) return undefined;
  const labelled = new Set(
    host
      .list(NODES, undefined, `${NODE_POOL_LABEL}=${pool}`)
      .map((node) => node.name)
      .filter((name) => name !== undefined),
  );
  return labelled.size > 0 ? labelled : undefined;
}
