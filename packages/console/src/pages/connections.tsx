import { useEffect, useState, type FormEvent } from 'react';
import { api, type ConnectionPage } from '../api';
import { Badge, ErrorNote, Heading, StatusNote } from '../components';
import { when } from '../format';
import { go, href } from '../router';

const PAGE_SIZE = '25';

export function Connections({ tenantId, params }: { tenantId: string; params: URLSearchParams }) {
  const filter = {
    status: params.get('status') ?? undefined,
    kind: params.get('kind') ?? undefined,
    userId: params.get('userId') ?? undefined,
  };
  const after = params.get('after') ?? undefined;
  const [page, setPage] = useState<ConnectionPage | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [userId, setUserId] = useState(filter.userId ?? '');
  const [status, setStatus] = useState(filter.status ?? '');
  const [kind, setKind] = useState(filter.kind ?? '');
  const key = params.toString();

  useEffect(() => {
    setPage(null);
    setError(null);
    api
      .connections(tenantId, { ...filter, after, limit: PAGE_SIZE })
      .then(setPage, (e: Error) => setError(`Connections could not be read: ${e.message}`));
  }, [tenantId, key]);

  function apply(e: FormEvent) {
    e.preventDefault();
    go(['tenants', tenantId, 'connections'], { status, kind, userId: userId.trim() });
  }

  return (
    <>
      <Heading>Connections of {tenantId}</Heading>
      <form className="filters" onSubmit={apply} aria-label="Filter connections">
        <div>
          <label htmlFor="f-status">Health</label>
          <select id="f-status" value={status} onChange={(e) => setStatus(e.target.value)}>
            <option value="">any</option>
            <option value="active">active</option>
            <option value="reauth_required">reauth required</option>
          </select>
        </div>
        <div>
          <label htmlFor="f-kind">Kind</label>
          <select id="f-kind" value={kind} onChange={(e) => setKind(e.target.value)}>
            <option value="">any</option>
            <option value="user">user</option>
            <option value="admin">admin</option>
          </select>
        </div>
        <div>
          <label htmlFor="f-user">Partner user id</label>
          <input id="f-user" value={userId} onChange={(e) => setUserId(e.target.value)} maxLength={200} />
        </div>
        <button type="submit">Apply filters</button>
      </form>
      <StatusNote message={params.get('deleted') ? `Connection ${params.get('deleted')} deleted.` : null} />
      <ErrorNote error={error} />
      {page === null && !error ? <p>Loading connections…</p> : null}
      {page?.connections.length === 0 ? <p>No connection matches.</p> : null}
      {page && page.connections.length > 0 ? (
        <table>
          <caption className="visually-hidden">Connections</caption>
          <thead>
            <tr>
              <th scope="col">Connection</th>
              <th scope="col">Kind</th>
              <th scope="col">Health</th>
              <th scope="col">Last error</th>
              <th scope="col">Token expires</th>
              <th scope="col">Last renewed</th>
            </tr>
          </thead>
          <tbody>
            {page.connections.map((c) => (
              <tr key={c.id}>
                <th scope="row">
                  <a href={href(['tenants', tenantId, 'connections', c.id])}>
                    {c.userId ?? (c.kind === 'admin' ? 'admin connection' : c.id)}
                  </a>
                  <div className="muted small">{c.upstreamUser.email ?? c.upstreamUser.id}</div>
                </th>
                <td>{c.kind}</td>
                <td>
                  <Badge value={c.status} />
                </td>
                <td>
                  {c.lastError ? (
                    <>
                      <code>{c.lastError.code}</code> <span className="muted small">{when(c.lastError.at)}</span>
                    </>
                  ) : (
                    'none'
                  )}
                </td>
                <td>{when(c.accessTokenExpiresAt)}</td>
                <td>{when(c.lastRefreshedAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <nav aria-label="Pages of connections" className="pager">
        {after ? <a href={href(['tenants', tenantId, 'connections'], filter)}>First page</a> : null}
        {page?.next ? <a href={href(['tenants', tenantId, 'connections'], { ...filter, after: page.next })}>Next page</a> : null}
      </nav>
    </>
  );
}
