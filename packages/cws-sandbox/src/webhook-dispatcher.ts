import { randomUUID } from 'node:crypto';
import type { Clock, SandboxDelivery } from './types.js';
import { RingBuffer } from './ring-buffer.js';
import type { Webhook, WebhookStore } from './webhook-store.js';
import type { WorkflowEvent } from './workflow-store.js';

const ATTEMPT_TIMEOUT_MS = 5000;
const FIRST_BACKOFF_MS = 200;
const DELIVERY_LOG_CAPACITY = 1000;

/**
 * Posts events to subscribed webhooks with their configured headers, retrying a failed attempt (non-2xx
 * or network error) `retries` times with a doubling backoff, under the same delivery id.
 */
export class WebhookDispatcher {
  private readonly log = new RingBuffer<SandboxDelivery>(DELIVERY_LOG_CAPACITY);
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly inFlight = new Set<Promise<void>>();
  private readonly aborter = new AbortController();
  private dropRateValue = 0;
  /** Error diffusion: each delivery adds the rate; a delivery that brings it to 1 is dropped (and takes 1 off). */
  private dropCredit = 0;

  constructor(
    private readonly webhooks: WebhookStore,
    private readonly retries: number,
    private readonly companyId: string,
    private readonly clock: Clock,
    private readonly onDrop: () => void = () => undefined,
  ) {}

  get dropRate(): number {
    return this.dropRateValue;
  }

  /**
   * Test control: that share (0..1) of the deliveries from now on is dropped, deterministically: the n-th delivery
   * after this call is dropped when floor(n * rate) grows at n (rate 0.25: the 4th, 8th, ...; 1: all; 0: none).
   */
  setDropRate(rate: number): void {
    this.dropRateValue = rate;
    this.dropCredit = 0;
  }

  dispatch(event: WorkflowEvent): void {
    if (this.aborter.signal.aborted) return;
    const { workflow } = event;
    const occurredAt = new Date(this.clock()).toISOString();
    for (const webhook of this.webhooks.subscribedTo(event.kind)) {
      const id = `dlv_${randomUUID()}`;
      const payload = {
        id,
        event: event.kind,
        occurredAt,
        companyId: this.companyId,
        workflowId: workflow.id,
        ...(event.kind === 'workflow_step_updated' ? { transition: event.transition } : { attribute: event.attribute }),
        workflow: {
          id: workflow.id,
          name: workflow.name,
          step: workflow.step,
          versionNumber: workflow.versionNumber,
          lastModified: workflow.lastModified,
          creator: workflow.creator,
        },
      };
      const delivery: SandboxDelivery = {
        id,
        webhookId: webhook.id,
        event: event.kind,
        workflowId: workflow.id,
        targetURL: webhook.targetURL,
        attempts: 0,
        state: 'pending',
        lastStatus: null,
        lastError: null,
      };
      this.log.push(delivery);
      if (this.drops()) {
        delivery.state = 'dropped';
        this.onDrop();
        continue;
      }
      this.track(this.attempt(delivery, webhook, JSON.stringify(payload)));
    }
  }

  deliveries(): SandboxDelivery[] {
    return this.log.toArray().map((d) => ({ ...d }));
  }

  async close(): Promise<void> {
    this.aborter.abort();
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    await Promise.allSettled([...this.inFlight]);
  }

  private async attempt(delivery: SandboxDelivery, webhook: Webhook, body: string): Promise<void> {
    delivery.attempts++;
    const headers = new Headers({ 'content-type': 'application/json', 'user-agent': 'cws-sandbox-webhooks/1' });
    for (const [name, value] of Object.entries(webhook.headers)) headers.set(name, value);
    try {
      const res = await fetch(webhook.targetURL, {
        method: 'POST',
        headers,
        body,
        redirect: 'manual',
        signal: AbortSignal.any([this.aborter.signal, AbortSignal.timeout(ATTEMPT_TIMEOUT_MS)]),
      });
      delivery.lastStatus = res.status;
      delivery.lastError = null;
      await res.arrayBuffer().catch(() => undefined);
      if (res.status >= 200 && res.status < 300) {
        delivery.state = 'delivered';
        return;
      }
    } catch (e) {
      if (this.aborter.signal.aborted) return;
      delivery.lastStatus = null;
      delivery.lastError = e instanceof Error ? (e.cause instanceof Error ? e.cause.message : e.message) : String(e);
    }
    if (delivery.attempts > this.retries || this.aborter.signal.aborted) {
      delivery.state = 'failed';
      return;
    }
    const delay = FIRST_BACKOFF_MS * 2 ** (delivery.attempts - 1);
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.track(this.attempt(delivery, webhook, body));
    }, delay);
    timer.unref();
    this.timers.add(timer);
  }

  private drops(): boolean {
    if (this.dropRateValue === 0) return false;
    this.dropCredit += this.dropRateValue;
    // The epsilon absorbs float error (ten times 0.1 is 0.9999999999999999).
    if (this.dropCredit < 1 - 1e-9) return false;
    this.dropCredit -= 1;
    return true;
  }

  private track(work: Promise<void>): void {
    this.inFlight.add(work);
    void work.finally(() => this.inFlight.delete(work));
  }
}
