// The servicetopology component's exports: what filters-js/build gives componentize-js.

import { exportFilter } from '../sdk/edgegate-filter/guest.js';
import ServiceTopology from './servicetopology.js';

export const { manifest, configure, begin, filter, filterBatch } = exportFilter(ServiceTopology);
