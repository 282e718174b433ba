import { Fragment, useCallback, useEffect, useState, type FormEvent } from 'react';
import { api, type Attempt, type EventPage } from '../api';
import { Badge, ErrorNote, Heading, StatusNote } from '../components';
import { ms, when } from '../format';
import { href } from '../router';
import { EndpointsSection } from './endpoints';

const PAGE_SIZE = 50;

/** datetime-local wants local time without a zone. */
function localInput(d: Date): string {
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function Attempts({ tenantId, eventId }: { tenantId: string; eventId: string }) {
  const [attempts, setAttempts] = useState<Attempt[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    api.attempts(tenantId, eventId).then(
      (a) => setAttempts(a.attempts),
      (e: Error) => setError(e.message),
    );
  }, [tenantId, eventId]);
  if (error) return <ErrorNote error={`Attempts could not be read: ${error}`} />;
  if (!attempts) return <p>Loading attempts…</p>;
  if (attempts.length === 0) return <p>No delivery attempt yet.</p>;
  return (
    <table className="nested">
      <caption>Delivery attempts</caption>
      <thead>
        <tr>
          <th scope="col">When</th>
          <th scope="col">Answer</th>
          <th scope="col">Error</th>
          <th scope="col">Duration</th>
        </tr>
      </thead>
      <tbody>
        {attempts.map((a, i) => (
          <tr key={`${a.at}-${i}`}>
            <td>{when(a.at)}</td>
            <td>{a.status ?? 'none'}</td>
            <td>{a.error ? <code>{a.error}</code> : '—'}</td>
            <td>{ms(a.durationMs)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function Events({ tenantId, params }: { tenantId: string; params: URLSearchParams }) {
  const after = params.get('after') ?? undefined;
  const [page, setPage] = useState<EventPage | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [message, setMessage] = useState<string | null>(null);
  const [open, setOpen] = useState<Set<string>>(new Set());
  const [since, setSince] = useState(() => localInput(new Date(Date.now() - 24 * 3600_000)));
  const [reload, setReload] = useState(0);
  const [endpointsReload, setEndpointsReload] = useState(0);

  const load = useCallback(() => {
    api.events(tenantId, after, PAGE_SIZE).then(setPage, (e: Error) => setError(`Events could not be read: ${e.message}`));
  }, [tenantId, after]);
  useEffect(load, [load, reload]);

  // While a delivery is under way (or was just asked for), watch it land.
  const [watchUntil, setWatchUntil] = useState(0);
  const pending = page?.events.some((e) => e.delivery.state === 'pending') ?? false;
  useEffect(() => {
    if (!pending && Date.now() > watchUntil) return;
    const timer = window.setTimeout(() => setReload((n) => n + 1), 1000);
    return () => window.clearTimeout(timer);
  }, [pending, page, watchUntil]);

  async function redeliver(id: string) {
    setError(null);
    try {
      await api.redeliver(tenantId, id);
      setMessage(`Event ${id} queued for delivery again.`);
      setWatchUntil(Date.now() + 30_000);
      setReload((n) => n + 1);
    } catch (e) {
      setError(`Redelivery refused: ${(e as Error).message}`);
    }
  }

  async function redeliverDead(e: FormEvent) {
    e.preventDefault();
    setError(null);
    const at = new Date(since);
    if (Number.isNaN(at.getTime())) return setError('Give a valid date and time.');
    try {
      const { queued } = await api.redeliverSince(tenantId, at.toISOString(), 'dead');
      setMessage(`${queued} dead event${queued === 1 ? '' : 's'} since ${when(at.toISOString())} queued for delivery again.`);
      setWatchUntil(Date.now() + 30_000);
      setReload((n) => n + 1);
    } catch (err) {
      setError(`Redelivery refused: ${(err as Error).message}`);
    }
  }

  function toggle(id: string) {
    const next = new Set(open);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    setOpen(next);
  }

  return (
    <>
      <Heading>Events of {tenantId}</Heading>
      <EndpointsSection tenantId={tenantId} reload={endpointsReload} />
      <form className="filters" onSubmit={(e) => void redeliverDead(e)} aria-label="Redeliver dead events">
        <div>
          <label htmlFor="since">Redeliver every dead event received since (your local time)</label>
          <input id="since" type="datetime-local" required value={since} onChange={(e) => setSince(e.target.value)} />
        </div>
        <button type="submit">Redeliver dead events</button>
        <button
          type="button"
          onClick={() => {
            setReload((n) => n + 1);
            setEndpointsReload((n) => n + 1);
          }}
        >
          Refresh list
        </button>
      </form>
      <StatusNote message={message} />
      <ErrorNote error={error} />
      <h2>Events</h2>
      {page === null && !error ? <p>Loading events…</p> : null}
      {page?.events.length === 0 ? <p>No event {after ? 'after this point' : 'yet'}.</p> : null}
      {page && page.events.length > 0 ? (
        <table>
          <caption className="visually-hidden">Events, oldest first</caption>
          <thead>
            <tr>
              <th scope="col">Received</th>
              <th scope="col">Type</th>
              <th scope="col">Delivery</th>
              <th scope="col">Attempts</th>
              <th scope="col">Last error</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {page.events.map((ev) => (
              <Fragment key={ev.id}>
                <tr>
                  <td>{when(ev.receivedAt)}</td>
                  <th scope="row">
                    {ev.type}
                    <div className="muted small">
                      {ev.source} · <code>{ev.id}</code>
                    </div>
                  </th>
                  <td>
                    <Badge value={ev.delivery.state} />
                    {ev.delivery.deliveredAt ? <div className="muted small">{when(ev.delivery.deliveredAt)}</div> : null}
                  </td>
                  <td>{ev.delivery.attempts}</td>
                  <td>{ev.delivery.lastError ? <code>{ev.delivery.lastError}</code> : '—'}</td>
                  <td>
                    <div className="links">
                      <button
                        type="button"
                        aria-expanded={open.has(ev.id)}
                        aria-controls={`attempts-${ev.id}`}
                        onClick={() => toggle(ev.id)}
                      >
                        Attempts<span className="visually-hidden"> of event {ev.id}</span>
                      </button>
                      {ev.delivery.state !== 'filtered' ? (
                        <button type="button" onClick={() => void redeliver(ev.id)}>
                          Redeliver<span className="visually-hidden"> event {ev.id}</span>
                        </button>
                      ) : null}
                    </div>
                  </td>
                </tr>
                {open.has(ev.id) ? (
                  <tr id={`attempts-${ev.id}`}>
                    <td colSpan={6}>
                      <Attempts key={`${ev.id}-${ev.delivery.attempts}`} tenantId={tenantId} eventId={ev.id} />
                    </td>
                  </tr>
                ) : null}
              </Fragment>
            ))}
          </tbody>
        </table>
      ) : null}
      <nav aria-label="Pages of events" className="pager">
        {after ? <a href={href(['tenants', tenantId, 'events'])}>First page</a> : null}
        {page?.next && page.events.length >= PAGE_SIZE ? (
          <a href={href(['tenants', tenantId, 'events'], { after: page.next })}>Next page</a>
        ) : null}
      </nav>
    </>
  );
}
