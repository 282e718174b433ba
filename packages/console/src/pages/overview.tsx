import { useCallback, useEffect, useState } from 'react';
import { api, TENANTS_PAGE, type Figures, type Tenant } from '../api';
import { ErrorNote, Heading } from '../components';
import { ms, when } from '../format';
import { href } from '../router';

function Count({ label, value }: { label: string; value: number | undefined }) {
  return (
    <div className="figure">
      <dt>{label}</dt>
      <dd>{(value ?? 0).toLocaleString('en-US')}</dd>
    </div>
  );
}

/** A tenant's own budgets (`read 400/60s, write 40/60s`), or whose it follows. */
function budgetText(quotas: Tenant['quotas']): string {
  const own = Object.entries(quotas ?? {}).map(([cls, budget]) => `${cls} ${budget}`);
  return own.length > 0 ? own.join(', ') : "the environment's";
}

function FiguresPanel() {
  const [figures, setFigures] = useState<Figures | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = useCallback(() => {
    api.figures().then(setFigures, (e: Error) => setError(`Figures could not be read: ${e.message}`));
  }, []);
  useEffect(load, [load]);
  if (error) return <ErrorNote error={error} />;
  if (!figures) return <p>Loading figures…</p>;
  const r = figures.renewals;
  const u = figures.upstream;
  const q = figures.quotas;
  return (
    <section aria-labelledby="figures-title" className="figures">
      <div className="section-head">
        <h2 id="figures-title">At a glance</h2>
        <button type="button" onClick={load}>
          Refresh figures
        </button>
      </div>
      <p className="help">
        Instance <code>{figures.instanceId}</code>, since {when(figures.startedAt)} (its Prometheus metrics; other instances count their
        own).
      </p>
      <div className="cards">
        <article className="card" aria-labelledby="renewals-title">
          <h3 id="renewals-title">Renewals</h3>
          <dl className="figure-grid">
            <Count label="Succeeded" value={r.byOutcome.success} />
            <Count label="Failed (retried)" value={r.byOutcome.failure} />
            <Count label="Need reconnecting" value={r.byOutcome.reauth_required} />
            <Count label="Lost a race" value={r.byOutcome.lost_race} />
            <div className="figure">
              <dt>Mean time</dt>
              <dd>{ms(r.meanMs)}</dd>
            </div>
            <div className="figure">
              <dt>95 % under</dt>
              <dd>{ms(r.p95UnderMs)}</dd>
            </div>
            <div className="figure">
              <dt>Most overdue</dt>
              <dd>{r.overdueSeconds ? `${r.overdueSeconds.toLocaleString('en-US')} s` : 'none'}</dd>
            </div>
          </dl>
        </article>
        <article className="card" aria-labelledby="upstream-title">
          <h3 id="upstream-title">Upstream calls (facade and proxy)</h3>
          <dl className="figure-grid">
            <Count label="2xx" value={u.byOutcome['2xx']} />
            <Count label="3xx" value={u.byOutcome['3xx']} />
            <Count label="4xx" value={u.byOutcome['4xx']} />
            <Count label="5xx" value={u.byOutcome['5xx']} />
            <Count label="No answer" value={u.byOutcome.error} />
            <div className="figure">
              <dt>Mean time</dt>
              <dd>{ms(u.meanMs)}</dd>
            </div>
            <div className="figure">
              <dt>95 % under</dt>
              <dd>{ms(u.p95UnderMs)}</dd>
            </div>
          </dl>
        </article>
        <article className="card" aria-labelledby="quotas-title">
          <h3 id="quotas-title">Upstream budgets</h3>
          <dl className="figure-grid">
            <Count label="Reads sent" value={q.read.spent} />
            <Count label="Reads that waited" value={q.read.waited} />
            <Count label="Reads refused" value={q.read.refused} />
            <Count label="Reads the upstream refused" value={q.read.upstream429} />
            <Count label="Writes sent" value={q.write.spent} />
            <Count label="Writes that waited" value={q.write.waited} />
            <Count label="Writes refused" value={q.write.refused} />
            <Count label="Writes the upstream refused" value={q.write.upstream429} />
          </dl>
        </article>
      </div>
    </section>
  );
}

export function Overview() {
  const [tenants, setTenants] = useState<Tenant[] | null>(null);
  const [more, setMore] = useState(false);
  const [error, setError] = useState<string | null>(null);
  // A page at a time: with tens of thousands of tenants, the list never asks for all of them.
  const load = useCallback((after?: string) => {
    api.tenants(after).then(
      (page) => {
        setTenants((shown) => [...(after ? (shown ?? []) : []), ...page]);
        setMore(page.length === TENANTS_PAGE);
      },
      (e: Error) => setError(`Tenants could not be read: ${e.message}`),
    );
  }, []);
  useEffect(() => load(), [load]);
  return (
    <>
      <Heading>Tenants</Heading>
      <FiguresPanel />
      <section aria-labelledby="tenants-title">
        <h2 id="tenants-title">All tenants</h2>
        <ErrorNote error={error} />
        {tenants === null && !error ? <p>Loading tenants…</p> : null}
        {tenants?.length === 0 ? (
          <p>
            No tenant yet. Create one with the operator key: <code>POST /v1/tenants</code>.
          </p>
        ) : null}
        {tenants && tenants.length > 0 ? (
          <table>
            <caption className="visually-hidden">Tenants</caption>
            <thead>
              <tr>
                <th scope="col">Tenant</th>
                <th scope="col">Environment</th>
                <th scope="col">Design</th>
                <th scope="col">Events target</th>
                <th scope="col">Events kept</th>
                <th scope="col">Upstream budget</th>
                <th scope="col">Created</th>
                <th scope="col">Open</th>
              </tr>
            </thead>
            <tbody>
              {tenants.map((t) => (
                <tr key={t.id}>
                  <th scope="row">
                    {t.name} <span className="muted">({t.id})</span>
                  </th>
                  <td>{t.environment}</td>
                  <td>{t.design}</td>
                  <td>{t.eventsTargetUrl ? (t.eventsTargetDisabled ? 'disabled (410 Gone)' : t.eventsTargetUrl) : 'none'}</td>
                  <td>{t.eventRetentionDays === 1 ? '1 day' : `${t.eventRetentionDays} days`}</td>
                  <td>{budgetText(t.quotas)}</td>
                  <td>{when(t.createdAt)}</td>
                  <td>
                    <div className="links">
                      <a href={href(['tenants', t.id, 'connections'])}>
                        Connections<span className="visually-hidden"> of {t.name}</span>
                      </a>
                      <a href={href(['tenants', t.id, 'events'])}>
                        Events<span className="visually-hidden"> of {t.name}</span>
                      </a>
                      <a href={href(['tenants', t.id, 'sync'])}>
                        Sync<span className="visually-hidden"> of {t.name}</span>
                      </a>
                      <a href={href(['tenants', t.id, 'audit'])}>
                        Audit<span className="visually-hidden"> of {t.name}</span>
                      </a>
                    </div>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : null}
        {tenants && more ? (
          <button type="button" onClick={() => load(tenants.at(-1)?.id)}>
            More tenants
          </button>
        ) : null}
      </section>
    </>
  );
}
