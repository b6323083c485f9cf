// The `openyurt.io/topologyKeys` annotation: how far a Service's traffic may travel from the
// node it starts on.

/** The annotation on a Service that limits which endpoints a node sees. */
export const TOPOLOGY_KEYS = 'openyurt.io/topologyKeys';

/** Where a Service's endpoints must be for a node to use them: `Topology.NODE` or `Topology.POOL`. */
export class Topology {
  /** A topology by its name (`node`, `pool`). */
  constructor(name) {
    this.name = name;
    Object.freeze(this);
  }

  /** Parses the annotation's value; undefined for values OpenYurt does not know (which leave the endpoints as they are). */
  static parse(value) {
    return VALUES.get(value.trim());
  }

  /** The topology a Service (a `KubeObject`) asks for, if it is annotated with a known one. */
  static of(service) {
    const value = service.annotation(TOPOLOGY_KEYS);
    return value === undefined ? undefined : Topology.parse(value);
  }
}

/** On the node itself (`kubernetes.io/hostname`). */
Topology.NODE = new Topology('node');
/** In the node's pool (`openyurt.io/nodepool`, or `kubernetes.io/zone`, which OpenYurt treats as the pool). */
Topology.POOL = new Topology('pool');
Object.freeze(Topology);

const VALUES = new Map([
  ['kubernetes.io/hostname', Topology.NODE],
  ['openyurt.io/nodepool', Topology.POOL],
  ['kubernetes.io/zone', Topology.POOL],
]);
