// The masterservice component's exports: what filters-js/build gives componentize-js.

import { exportFilter } from '../sdk/edgegate-filter/guest.js';
import MasterService from './masterservice.js';

export const { manifest, configure, begin, filter, filterBatch } = exportFilter(MasterService);
