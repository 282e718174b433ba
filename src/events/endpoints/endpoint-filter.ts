import { compileJsonFilter, type JsonFilter } from '../../common/json-filter.js';

/**
 * An endpoint's filter over the delivered body `{type, timestamp, data}` (docs/endpoints.md): the JSON filter language
 * of src/common/json-filter.ts, compiled once when the endpoint is written (a bad filter is `400 validation_failed`
 * naming its path, as `filter.$or[1].data.status.$gt`) and once per endpoint version by the fan-out.
 */
export type EndpointFilter = JsonFilter;

export type CompiledFilter = { ok: true; filter: EndpointFilter } | { ok: false; path: string; message: string };

export function compileEndpointFilter(filter: unknown): CompiledFilter {
  return compileJsonFilter(filter);
}
