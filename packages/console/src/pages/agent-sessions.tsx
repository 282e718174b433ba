import { useEffect, useState, type FormEvent } from 'react';
import { api, type AgentSession, type AgentSessionPage } from '../api';
import { Badge, ConfirmDialog, ErrorNote, Heading, StatusNote } from '../components';
import { when } from '../format';
import { go, href } from '../router';

const PAGE_SIZE = '25';

/** A tenant's agent sessions (docs/agents.md): who each acts for, its tools and its state; a live one can be revoked. */
export function AgentSessions({ tenantId, params }: { tenantId: string; params: URLSearchParams }) {
  const filter = { userId: params.get('userId') ?? undefined };
  const after = params.get('after') ?? undefined;
  const [page, setPage] = useState<AgentSessionPage | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [userId, setUserId] = useState(filter.userId ?? '');
  const [revoking, setRevoking] = useState<AgentSession | null>(null);
  const [status, setStatus] = useState<string | null>(null);
  const key = params.toString();

  function load() {
    setError(null);
    api
      .agentSessions(tenantId, { ...filter, after, limit: PAGE_SIZE })
      .then(setPage, (e: Error) => setError(`Agent sessions could not be read: ${e.message}`));
  }
  useEffect(() => {
    setPage(null);
    load();
  }, [tenantId, key]);

  function apply(e: FormEvent) {
    e.preventDefault();
    go(['tenants', tenantId, 'agents'], { userId: userId.trim() });
  }

  async function revoke(session: AgentSession) {
    setRevoking(null);
    try {
      await api.revokeAgentSession(tenantId, session.id);
      setStatus(`Agent session ${session.label ?? session.id} revoked: its agent is refused from now on.`);
      load();
    } catch (e) {
      setError(`Revoking failed: ${(e as Error).message}`);
    }
  }

  return (
    <>
      <Heading>Agent sessions of {tenantId}</Heading>
      <form className="filters" onSubmit={apply} aria-label="Filter agent sessions">
        <div>
          <label htmlFor="f-agent-user">Partner user id</label>
          <input id="f-agent-user" value={userId} onChange={(e) => setUserId(e.target.value)} maxLength={200} />
        </div>
        <button type="submit">Apply filter</button>
      </form>
      <StatusNote message={status} />
      <ErrorNote error={error} />
      {page === null && !error ? <p>Loading agent sessions…</p> : null}
      {page?.items.length === 0 ? <p>No agent session.</p> : null}
      {page && page.items.length > 0 ? (
        <table>
          <caption className="visually-hidden">Agent sessions</caption>
          <thead>
            <tr>
              <th scope="col">Session</th>
              <th scope="col">Acts for</th>
              <th scope="col">State</th>
              <th scope="col">Tools</th>
              <th scope="col">Expires</th>
              <th scope="col">Last used</th>
              <th scope="col">
                <span className="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {page.items.map((s) => (
              <tr key={s.id}>
                <th scope="row">
                  {s.label ?? 'unnamed'}
                  <div className="muted small">{s.id}</div>
                </th>
                <td>{s.userId}</td>
                <td>
                  <Badge value={s.status} />
                </td>
                <td className="small">{s.tools.join(', ')}</td>
                <td>{when(s.expiresAt)}</td>
                <td>{when(s.lastUsedAt)}</td>
                <td>
                  {s.status === 'active' ? (
                    <button type="button" className="danger" onClick={() => setRevoking(s)}>
                      Revoke…
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <nav aria-label="Pages of agent sessions" className="pager">
        {after ? <a href={href(['tenants', tenantId, 'agents'], filter)}>First page</a> : null}
        {page?.next ? <a href={href(['tenants', tenantId, 'agents'], { ...filter, after: page.next })}>Next page</a> : null}
      </nav>
      <ConfirmDialog
        open={revoking !== null}
        title={`Revoke agent session ${revoking?.label ?? revoking?.id ?? ''}?`}
        confirm="Revoke session"
        onConfirm={() => revoking && void revoke(revoking)}
        onCancel={() => setRevoking(null)}
      >
        <p>Its agent is refused at once, on every instance. The partner can mint a new session for the user.</p>
      </ConfirmDialog>
    </>
  );
}
