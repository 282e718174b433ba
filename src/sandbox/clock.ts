/** Milliseconds since the epoch; injected so that expiry rules can be tested without sleeping. */
export type Clock = () => number;

export const systemClock: Clock = () => Date.now();
