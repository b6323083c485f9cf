// `masterservice`: rewrites the `default/kubernetes` Service kubelet sees, so that the
// `KUBERNETES_SERVICE_*` variables it gives pods (and the Service kube-proxy programs for
// them) lead to the gateway: `spec.clusterIP` and `spec.clusterIPs` become the hub's host,
// and the port named `https` its port. Every other Service passes untouched.
//
// The JavaScript port of filters/masterservice. Config (both optional):
// `{"host": "169.254.2.1", "port": 10268}`.

import { Filter, KEEP, Manifest, Verb, host } from '../sdk/edgegate-filter/index.js';
import { API_PORT_NAME, API_SERVICE_NAME, API_SERVICE_NAMESPACE, HubAddress } from '../sdk/edgegate-filter/kube.js';

/** Rewrites run after the filters that drop or prune, on what is left. */
const PRIORITY = 50;

/** The configured filter. */
export default class MasterService extends Filter {
  /** The filter for the hub at `hub` (a `HubAddress`). */
  constructor(hub) {
    super();
    this.hub = hub;
  }

  /** What the filter is: kubelet's lists and watches of Services. */
  static manifest() {
    return new Manifest('masterservice', '0.1.0', {
      matches: [{ group: '', resources: ['services'], verbs: [Verb.LIST, Verb.WATCH] }],
      components: ['kubelet'],
      priority: PRIORITY,
      configSchema: HubAddress.schema(),
    });
  }

  /** Builds the filter from `{"host", "port"}`. */
  static fromConfig(config) {
    return new MasterService(HubAddress.fromConfig(config));
  }

  /** Points `default/kubernetes` at the hub; keeps every Service. */
  filter(ctx, service) {
    if (!service.isNamed(API_SERVICE_NAMESPACE, API_SERVICE_NAME)) return KEEP;
    service.update('spec.clusterIP', this.hub.host);
    service.update('spec.clusterIPs', [this.hub.host]);
    this.hub.setNamedPort(service, 'spec.ports', API_PORT_NAME);
    if (service.isEdited()) host.count('rewritten', 1);
    return KEEP;
  }
}
