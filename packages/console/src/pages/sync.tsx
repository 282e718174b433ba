import { useEffect, useState, type FormEvent } from 'react';
import { api, type SyncPage } from '../api';
import { Badge, ErrorNote, Heading } from '../components';
import { age, when } from '../format';
import { go, href } from '../router';

const PAGE_SIZE = '25';

/** What each state means for the operator (docs/records.md). */
const STATES: Record<string, string> = {
  initial: 'never listed whole yet',
  failing: 'the listing has failed for an hour',
  paused: "the tenant's sync is off",
};

/**
 * Each synced user's copy of their workflows (docs/records.md): its state, when it was last listed whole, how late
 * its next listing is, how many records it holds, and why a listing failed. Figures only, never a record.
 */
export function Sync({ tenantId, params }: { tenantId: string; params: URLSearchParams }) {
  const filter = { userId: params.get('userId') ?? undefined };
  const after = params.get('after') ?? undefined;
  const [page, setPage] = useState<SyncPage | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [userId, setUserId] = useState(filter.userId ?? '');
  const [reload, setReload] = useState(0);
  const key = params.toString();

  useEffect(() => {
    setError(null);
    api.syncStates(tenantId, { ...filter, after, limit: PAGE_SIZE }).then(
      (p) => setPage(p),
      (e: Error) => setError(`Sync states could not be read: ${e.message}`),
    );
  }, [tenantId, key, reload]);

  function apply(e: FormEvent) {
    e.preventDefault();
    go(['tenants', tenantId, 'sync'], { userId: userId.trim() });
  }

  return (
    <>
      <Heading>Synced records of {tenantId}</Heading>
      <form className="filters" onSubmit={apply} aria-label="Filter sync states">
        <div>
          <label htmlFor="f-sync-user">Partner user id</label>
          <input id="f-sync-user" value={userId} onChange={(e) => setUserId(e.target.value)} maxLength={200} />
        </div>
        <button type="submit">Apply filter</button>
        <button type="button" onClick={() => setReload((n) => n + 1)}>
          Refresh list
        </button>
      </form>
      <ErrorNote error={error} />
      {page === null && !error ? <p>Loading sync states…</p> : null}
      {page?.items.length === 0 ? <p>No synced user: sync is off for this tenant, or no user is connected yet.</p> : null}
      {page && page.items.length > 0 ? (
        <table>
          <caption className="visually-hidden">Sync state of each user connection</caption>
          <thead>
            <tr>
              <th scope="col">User</th>
              <th scope="col">State</th>
              <th scope="col">Last full listing</th>
              <th scope="col">Lag</th>
              <th scope="col">Records</th>
              <th scope="col">Last error</th>
            </tr>
          </thead>
          <tbody>
            {page.items.map((s) => (
              <tr key={s.connectionId}>
                <th scope="row">
                  <a href={href(['tenants', tenantId, 'connections', s.connectionId])}>{s.userId}</a>
                  <div className="muted small">
                    <code>{s.connectionId}</code>
                  </div>
                </th>
                <td>
                  <Badge value={s.state} />
                  {STATES[s.state] ? <div className="muted small">{STATES[s.state]}</div> : null}
                </td>
                <td>
                  {s.lastListedAt ? when(s.lastListedAt) : 'never'}
                  <div className="muted small">next {when(s.nextListAt)}</div>
                </td>
                <td>{s.state === 'paused' ? '—' : s.lagSeconds > 0 ? `${age(s.lagSeconds)} late` : 'on time'}</td>
                <td>{s.records.toLocaleString('en-US')}</td>
                <td>
                  {s.lastError ? <span className="small">{s.lastError}</span> : 'none'}
                  {s.failingSince ? <div className="muted small">failing since {when(s.failingSince)}</div> : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <nav aria-label="Pages of sync states" className="pager">
        {after ? <a href={href(['tenants', tenantId, 'sync'], filter)}>First page</a> : null}
        {page?.next ? <a href={href(['tenants', tenantId, 'sync'], { ...filter, after: page.next })}>Next page</a> : null}
      </nav>
    </>
  );
}
