import { useEffect, useState } from 'react';
import { api, whenSignedOut } from './api';
import { Heading } from './components';
import { AgentSessions } from './pages/agent-sessions';
import { Audit } from './pages/audit';
import { Connection } from './pages/connection';
import { Connections } from './pages/connections';
import { Events } from './pages/events';
import { Overview } from './pages/overview';
import { SignIn } from './pages/sign-in';
import { Sync } from './pages/sync';
import { href, useRoute, type Route } from './router';

function View({ route }: { route: Route }) {
  const [first, tenantId, section, id] = route.path;
  if (!first) return <Overview />;
  if (first === 'audit' && !tenantId) return <Audit key={route.params.toString()} params={route.params} />;
  if (first === 'tenants' && tenantId && section === 'audit')
    return <Audit key={`${tenantId}?${route.params.toString()}`} tenantId={tenantId} params={route.params} />;
  if (first === 'tenants' && tenantId && section === 'connections' && id)
    return <Connection key={`${tenantId}/${id}`} tenantId={tenantId} connectionId={id} />;
  if (first === 'tenants' && tenantId && section === 'connections')
    return <Connections key={`${tenantId}?${route.params.toString()}`} tenantId={tenantId} params={route.params} />;
  if (first === 'tenants' && tenantId && section === 'agents')
    return <AgentSessions key={`${tenantId}?${route.params.toString()}`} tenantId={tenantId} params={route.params} />;
  if (first === 'tenants' && tenantId && section === 'sync')
    return <Sync key={`${tenantId}?${route.params.toString()}`} tenantId={tenantId} params={route.params} />;
  if (first === 'tenants' && tenantId && section === 'events')
    return <Events key={`${tenantId}?${route.params.toString()}`} tenantId={tenantId} params={route.params} />;
  return (
    <>
      <Heading>Not found</Heading>
      <p>
        No such page. <a href={href([])}>Back to the tenants</a>.
      </p>
    </>
  );
}

export function App() {
  const route = useRoute();
  const [state, setState] = useState<'checking' | 'signed-out' | 'signed-in'>('checking');
  const [notice, setNotice] = useState<string | null>(null);

  useEffect(() => {
    whenSignedOut(() => {
      setNotice('Your console session has ended: sign in again.');
      setState('signed-out');
    });
    void api.resume().then((ok) => setState(ok ? 'signed-in' : 'signed-out'));
  }, []);

  async function signOut() {
    await api.signOut().catch(() => undefined);
    setNotice('Signed out.');
    setState('signed-out');
  }

  if (state === 'checking') return <p className="loading">Loading the console…</p>;
  if (state === 'signed-out') return <SignIn notice={notice} onSignedIn={() => setState('signed-in')} />;

  const [, tenantId] = route.path;
  return (
    <>
      <a
        className="skip"
        href="#main"
        onClick={(e) => {
          e.preventDefault();
          document.querySelector<HTMLElement>('main h1')?.focus();
        }}
      >
        Skip to content
      </a>
      <header className="top">
        <span className="brand">cws-connect console</span>
        <nav aria-label="Main">
          <ul>
            <li>
              <a href={href([])} aria-current={route.path.length === 0 ? 'page' : undefined}>
                Tenants
              </a>
            </li>
            <li>
              <a href={href(['audit'])} aria-current={route.path[0] === 'audit' ? 'page' : undefined}>
                Audit trail
              </a>
            </li>
            {tenantId ? (
              <>
                <li>
                  <a href={href(['tenants', tenantId, 'connections'])} aria-current={route.path[2] === 'connections' ? 'page' : undefined}>
                    {tenantId}: connections
                  </a>
                </li>
                <li>
                  <a href={href(['tenants', tenantId, 'events'])} aria-current={route.path[2] === 'events' ? 'page' : undefined}>
                    {tenantId}: events
                  </a>
                </li>
                <li>
                  <a href={href(['tenants', tenantId, 'sync'])} aria-current={route.path[2] === 'sync' ? 'page' : undefined}>
                    {tenantId}: sync
                  </a>
                </li>
                <li>
                  <a href={href(['tenants', tenantId, 'agents'])} aria-current={route.path[2] === 'agents' ? 'page' : undefined}>
                    {tenantId}: agents
                  </a>
                </li>
                <li>
                  <a href={href(['tenants', tenantId, 'audit'])} aria-current={route.path[2] === 'audit' ? 'page' : undefined}>
                    {tenantId}: audit
                  </a>
                </li>
              </>
            ) : null}
          </ul>
        </nav>
        <button type="button" className="sign-out" onClick={() => void signOut()}>
          Sign out
        </button>
      </header>
      <main id="main">
        <View route={route} />
      </main>
    </>
  );
}
