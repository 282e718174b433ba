import { useCallback, useEffect, useState } from 'react';
import { api, ApiError, type Connection as ConnectionData, type Renewal } from '../api';
import { Badge, ConfirmDialog, ErrorNote, Heading, StatusNote } from '../components';
import { explain, ms, when } from '../format';
import { go, href } from '../router';

export function Connection({ tenantId, connectionId }: { tenantId: string; connectionId: string }) {
  const [connection, setConnection] = useState<ConnectionData | null>(null);
  const [renewals, setRenewals] = useState<Renewal[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [message, setMessage] = useState<string | null>(null);
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);

  const load = useCallback(async () => {
    try {
      const [c, r] = await Promise.all([api.connection(tenantId, connectionId), api.renewals(tenantId, connectionId)]);
      setConnection(c);
      setRenewals(r.renewals);
    } catch (e) {
      setError(`The connection could not be read: ${(e as Error).message}`);
    }
  }, [tenantId, connectionId]);
  useEffect(() => {
    void load();
  }, [load]);

  async function renew() {
    setBusy(true);
    setError(null);
    setMessage(null);
    try {
      await api.renew(tenantId, connectionId);
      setMessage('Renewed: the connection has a new token pair.');
    } catch (e) {
      setError(e instanceof ApiError ? `Renewal refused (${e.code}): ${e.message}` : `Renewal failed: ${(e as Error).message}`);
    } finally {
      setBusy(false);
      await load();
    }
  }

  async function remove() {
    setConfirming(false);
    setBusy(true);
    try {
      await api.deleteConnection(tenantId, connectionId);
      go(['tenants', tenantId, 'connections'], { deleted: connectionId });
    } catch (e) {
      setError(`Delete failed: ${(e as Error).message}`);
      setBusy(false);
    }
  }

  const name = connection ? (connection.userId ?? (connection.kind === 'admin' ? 'admin connection' : connection.id)) : connectionId;
  return (
    <>
      <Heading>Connection {name}</Heading>
      <p>
        <a href={href(['tenants', tenantId, 'connections'])}>All connections of {tenantId}</a>
      </p>
      <ErrorNote error={error} />
      <StatusNote message={message} />
      {connection ? (
        <>
          <section aria-labelledby="health-title" className="card">
            <h2 id="health-title">Health</h2>
            <dl className="facts">
              <dt>Status</dt>
              <dd>
                <Badge value={connection.status} />
              </dd>
              <dt>Last error</dt>
              <dd>
                {connection.lastError ? (
                  <>
                    <code>{connection.lastError.code}</code> at {when(connection.lastError.at)}
                    {explain(connection.lastError.code) ? <div className="why">{explain(connection.lastError.code)}</div> : null}
                  </>
                ) : (
                  'none'
                )}
              </dd>
              {connection.statusReason && connection.statusReason !== connection.lastError?.code ? (
                <>
                  <dt>Needs attention because</dt>
                  <dd>
                    <code>{connection.statusReason}</code>
                  </dd>
                </>
              ) : null}
              <dt>Kind</dt>
              <dd>
                {connection.kind}
                {connection.isAdmin ? ' (company admin upstream)' : ''}
              </dd>
              <dt>Partner user id</dt>
              <dd>{connection.userId ?? '—'}</dd>
              <dt>Upstream user</dt>
              <dd>
                {connection.upstreamUser.id}
                {connection.upstreamUser.email ? ` (${connection.upstreamUser.email})` : ''}
              </dd>
              <dt>Scopes</dt>
              <dd>{connection.scopes.join(' ') || '—'}</dd>
              <dt>Access token expires</dt>
              <dd>{when(connection.accessTokenExpiresAt)}</dd>
              <dt>Last renewed</dt>
              <dd>{when(connection.lastRefreshedAt)}</dd>
              <dt>Connected</dt>
              <dd>{when(connection.createdAt)}</dd>
              <dt>Id</dt>
              <dd>
                <code>{connection.id}</code>
              </dd>
            </dl>
            <div className="actions">
              <button type="button" onClick={() => void renew()} disabled={busy}>
                Renew now
              </button>
              <button type="button" className="danger" onClick={() => setConfirming(true)} disabled={busy}>
                Delete…
              </button>
            </div>
          </section>
          <section aria-labelledby="renewals-title">
            <h2 id="renewals-title">Renewal history</h2>
            {renewals && renewals.length === 0 ? <p>No renewal yet.</p> : null}
            {renewals && renewals.length > 0 ? (
              <table>
                <caption className="visually-hidden">Renewals, newest first</caption>
                <thead>
                  <tr>
                    <th scope="col">When</th>
                    <th scope="col">Outcome</th>
                    <th scope="col">Error code</th>
                    <th scope="col">Duration</th>
                  </tr>
                </thead>
                <tbody>
                  {renewals.map((r, i) => (
                    <tr key={`${r.at}-${i}`}>
                      <td>{when(r.at)}</td>
                      <td>
                        <Badge value={r.outcome} />
                      </td>
                      <td>{r.error ? <code>{r.error}</code> : '—'}</td>
                      <td>{ms(r.durationMs)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            ) : null}
          </section>
        </>
      ) : !error ? (
        <p>Loading…</p>
      ) : null}
      <ConfirmDialog
        open={confirming}
        title={`Delete connection ${name}?`}
        confirm="Delete connection"
        onConfirm={() => void remove()}
        onCancel={() => setConfirming(false)}
      >
        <p>Its tokens are destroyed and the partner is told (connection.deleted). The user has to connect again to use it.</p>
      </ConfirmDialog>
    </>
  );
}
