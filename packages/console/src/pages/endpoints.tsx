import { useEffect, useState } from 'react';
import { api, type Endpoint } from '../api';
import { Badge, ErrorNote } from '../components';
import { age, when } from '../format';

const DISABLED_BECAUSE: Record<string, string> = {
  request: 'Disabled on request (PATCH disabled: true).',
  failing: 'Disabled after failing for ENDPOINT_DISABLE_AFTER.',
  gone: 'Disabled: it answered 410 Gone.',
};

function Health({ health }: { health: Endpoint['health'] }) {
  return (
    <>
      <Badge value={health.state} />
      {health.disabledReason ? <div className="small">{DISABLED_BECAUSE[health.disabledReason] ?? health.disabledReason}</div> : null}
      {health.failingSince ? <div className="muted small">failing since {when(health.failingSince)}</div> : null}
    </>
  );
}

/** A tenant's event endpoints with their health (never a secret): where its events go, and whether they arrive. */
export function EndpointsSection({ tenantId, reload }: { tenantId: string; reload: number }) {
  const [endpoints, setEndpoints] = useState<Endpoint[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    api.endpoints(tenantId).then(
      (r) => {
        setEndpoints(r.endpoints);
        setError(null);
      },
      (e: Error) => setError(`Endpoints could not be read: ${e.message}`),
    );
  }, [tenantId, reload]);
  return (
    <section aria-labelledby="endpoints-title">
      <h2 id="endpoints-title">Endpoints</h2>
      <ErrorNote error={error} />
      {endpoints === null && !error ? <p>Loading endpoints…</p> : null}
      {endpoints?.length === 0 ? <p>No endpoint: its events are kept in the feed only.</p> : null}
      {endpoints && endpoints.length > 0 ? (
        <table>
          <caption className="visually-hidden">Event endpoints of {tenantId}</caption>
          <thead>
            <tr>
              <th scope="col">Endpoint</th>
              <th scope="col">Event types</th>
              <th scope="col">State</th>
              <th scope="col">Success (24 h)</th>
              <th scope="col">Pending</th>
            </tr>
          </thead>
          <tbody>
            {endpoints.map((ep) => (
              <tr key={ep.id}>
                <th scope="row">
                  <code>{ep.url}</code>
                  <div className="muted small">
                    {ep.description ?? (ep.id === '00000000-0000-0000-0000-000000000000' ? 'eventsTargetUrl' : 'no description')} ·{' '}
                    <code>{ep.id}</code>
                  </div>
                </th>
                <td>{ep.eventTypes ? ep.eventTypes.join(', ') : 'every type'}</td>
                <td>
                  <Health health={ep.health} />
                </td>
                <td>{ep.health.successRate24h === null ? '—' : `${(ep.health.successRate24h * 100).toFixed(1)} %`}</td>
                <td>
                  {ep.health.pending}
                  {ep.health.pending > 0 ? <div className="muted small">oldest {age(ep.health.oldestPendingSeconds)}</div> : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}
