// Services: the one behind a slice or an Endpoints object, looked up in the gateway's view.

import * as host from './host.js';
import { SERVICES } from './kube.js';

/** The label by which an EndpointSlice names its Service. */
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

/** The name of the Service an endpoint object of `kind` (an `EndpointsKind`) belongs to: a slice's label, an Endpoints object's own name; undefined when none. */
export function serviceName(kind, obj) {
  const name = kind.isSlice ? obj.label(SERVICE_NAME_LABEL) : obj.name;
  return name || undefined;
}

/** The Service an endpoint object belongs to, from the gateway's view; undefined if unnamed or unknown. */
export function serviceOf(kind, obj) {
  const namespace = obj.namespace;
  const name = serviceName(kind, obj);
  if (namespace === undefined || name === undefined) return undefined;
  return host.get(SERVICES, namespace, name);
}
