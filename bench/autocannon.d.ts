// autocannon ships no types; the part the benchmark uses.
declare module 'autocannon' {
  export interface Histogram {
    average: number;
    mean: number;
    p50: number;
    p90: number;
    p99: number;
    max: number;
  }
  export interface Result {
    requests: Histogram & { total: number };
    latency: Histogram;
    throughput: Histogram;
    errors: number;
    timeouts: number;
    non2xx: number;
    '2xx': number;
    /** Answers by status code. */
    statusCodeStats: Record<string, { count: number }>;
  }
  export interface RequestSpec {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string;
  }
  export interface Options {
    url: string;
    connections?: number;
    duration?: number;
    pipelining?: number;
    headers?: Record<string, string>;
    method?: string;
    body?: string;
    /** Stop after this many requests (instead of `duration`). */
    amount?: number;
    /** Seconds before a request counts as timed out (10). */
    timeout?: number;
    /** Requests per second over all connections (fixed rate). */
    overallRate?: number;
    /** The requests each connection sends in turn; `setupRequest` may change one before it is sent. */
    requests?: Array<RequestSpec & { setupRequest?: (req: RequestSpec) => RequestSpec }>;
  }
  /** A run: awaited for its result; `response` is emitted per answer with its latency (ms). */
  export interface Instance extends Promise<Result> {
    on(event: 'response', listener: (client: unknown, statusCode: number, resBytes: number, responseTime: number) => void): this;
  }
  function autocannon(options: Options): Instance;
  export default autocannon;
}
