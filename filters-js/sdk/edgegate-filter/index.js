// The edgegate filter SDK for JavaScript: write a filter as one class, export it with one call.
//
//   import { DROP, KEEP, Filter, Manifest, Verb } from './edgegate-filter/index.js';
//   import { flag } from './edgegate-filter/kube.js';
//
//   export default class CloudOnly extends Filter {
//     static manifest() {
//       return new Manifest('cloudonly', '0.1.0', {
//         matches: [{ group: '', resources: ['services'], verbs: [Verb.LIST, Verb.WATCH] }],
//       });
//     }
//     filter(ctx, obj) {
//       return flag(obj, 'example.com/cloud-only') ? DROP : KEEP;
//     }
//   }
//
// and, in the module componentize-js builds (guest.js imports the world's host interface,
// which only a component has):
//
//   import { exportFilter } from './edgegate-filter/guest.js';
//   import CloudOnly from './cloudonly.js';
//   export const { manifest, configure, begin, filter, filterBatch } = exportFilter(CloudOnly);
//
// Modules: types.js (context, manifest, decisions), object.js (`KubeObject`), filter.js
// (`Filter`), host.js (lookups, logging, counters), kube.js (annotations, the hub's address),
// endpoints.js (`EndpointsKind`: endpoints and their nodes), topology.js (`Topology`, the
// topologyKeys annotation), service.js (a slice's Service), pool.js (a pool's members),
// testing.js (`Harness`, a fake host), guest.js (`exportFilter`).

export * as host from './host.js';
export * as kube from './kube.js';
export * as endpoints from './endpoints.js';
export * as topology from './topology.js';
export * as service from './service.js';
export * as pool from './pool.js';
export { ConfigError, Filter } from './filter.js';
export { KubeObject, ObjectError } from './object.js';
export {
  Context,
  DROP,
  Drop,
  KEEP,
  Keep,
  Level,
  Manifest,
  NO_CONFIG,
  Replace,
  Resource,
  ResourceMatch,
  Verb,
} from './types.js';
