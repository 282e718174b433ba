import { useEffect, useState, type FormEvent } from 'react';
import { api, type AuditItem, type AuditPage } from '../api';
import { Badge, ErrorNote, Heading } from '../components';
import { when } from '../format';
import { go, href } from '../router';

const PAGE_SIZE = 50;

const ACTOR: Record<AuditItem['actor']['kind'], string> = {
  operator: 'Operator key',
  tenant_key: 'Tenant key',
  console: 'Console session',
  connect_session: 'Connect session',
  agent_session: 'Agent session',
  service: 'cws-connect',
};

function Who({ actor }: { actor: AuditItem['actor'] }) {
  return (
    <>
      {ACTOR[actor.kind]}
      {actor.id && actor.id !== 'operator' ? (
        <div className="muted small">
          <code>{actor.id}</code>
        </div>
      ) : null}
    </>
  );
}

/**
 * The audit trail, a page at a time (never every row): a tenant's own rows at #/tenants/<id>/audit, every row at
 * #/audit (the operator's listing, which can be narrowed to one tenant, a deleted one included).
 */
export function Audit({ tenantId, params }: { tenantId?: string; params: URLSearchParams }) {
  const after = params.get('after') ?? undefined;
  const filter = tenantId ? undefined : (params.get('tenantId') ?? undefined);
  const [page, setPage] = useState<AuditPage | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [typed, setTyped] = useState(filter ?? '');
  const path = tenantId ? ['tenants', tenantId, 'audit'] : ['audit'];

  useEffect(() => {
    const scope = tenantId ? { tenantId } : { all: true, tenantId: filter };
    api.audit(scope, after, PAGE_SIZE).then(setPage, (e: Error) => setError(`The audit trail could not be read: ${e.message}`));
  }, [tenantId, filter, after]);

  function applyFilter(e: FormEvent) {
    e.preventDefault();
    go(path, { tenantId: typed.trim() || undefined });
  }

  return (
    <>
      <Heading>{tenantId ? `Audit trail of ${tenantId}` : 'Audit trail'}</Heading>
      <p className="muted">
        Every change of credentials or data, newest first: who made it, in which request, and whether it succeeded. Failures of the same
        action by the same actor within a minute share one row, with their count.
      </p>
      {tenantId ? null : (
        <form className="filters" onSubmit={applyFilter} aria-label="Filter the audit trail">
          <div>
            <label htmlFor="audit-tenant">Tenant id</label>
            <input id="audit-tenant" value={typed} onChange={(e) => setTyped(e.target.value)} placeholder="every tenant" />
          </div>
          <button type="submit">Apply filter</button>
        </form>
      )}
      <ErrorNote error={error} />
      {page === null && !error ? <p>Loading the audit trail…</p> : null}
      {page?.items.length === 0 ? <p>No audit row {after ? 'after this point' : 'yet'}.</p> : null}
      {page && page.items.length > 0 ? (
        <table>
          <caption className="visually-hidden">Audit rows, newest first</caption>
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Action</th>
              <th scope="col">Outcome</th>
              <th scope="col">Who</th>
              {tenantId ? null : <th scope="col">Tenant</th>}
              <th scope="col">Target</th>
              <th scope="col">Request id</th>
            </tr>
          </thead>
          <tbody>
            {page.items.map((item) => (
              <tr key={item.id}>
                <td>{when(item.at)}</td>
                <th scope="row">
                  {item.action}
                  {item.userId ? <div className="muted small">user {item.userId}</div> : null}
                </th>
                <td>
                  <Badge value={item.outcome} />
                  {item.count > 1 ? <div className="muted small">{item.count} times</div> : null}
                </td>
                <td>
                  <Who actor={item.actor} />
                </td>
                {tenantId ? null : <td className="nowrap">{item.tenantId ?? '—'}</td>}
                <td>{item.target ? <code>{item.target}</code> : '—'}</td>
                <td>{item.requestId ? <code>{item.requestId}</code> : '—'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <nav aria-label="Pages of the audit trail" className="pager">
        {after ? <a href={href(path, { tenantId: filter })}>First page</a> : null}
        {page?.next ? <a href={href(path, { tenantId: filter, after: page.next })}>Next page</a> : null}
      </nav>
    </>
  );
}
