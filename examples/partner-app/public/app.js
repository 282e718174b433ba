// The partner page: asks its backend for a connect link, opens it with cws-connect's browser module.
const config = await (await fetch('/config.json')).json();
const { open, resultFromUrl } = await import(`${config.serviceUrl}/sdk/connect-browser.js`);

const $ = (id) => document.getElementById(id);
const button = $('connect');

function status(text, ok) {
  $('status').textContent = text;
  $('status').className = `status ${ok ? 'ok' : 'bad'}`;
}

async function showConnection(connectionId) {
  const res = await fetch(`/api/connections/${connectionId}`);
  const { connection, me } = await res.json();
  const rows = [
    ['connection', connection.id],
    ['your user id', connection.userId],
    ['CWS user', `${connection.upstreamUser.id} <${connection.upstreamUser.email}>`],
    ['status', connection.status],
    ['token expires', connection.accessTokenExpiresAt],
    ['GET /me as them', me ? `${me.id} · ${me.email}` : '—'],
  ];
  $('connection').replaceChildren(
    ...rows.flatMap(([k, v]) => [
      Object.assign(document.createElement('dt'), { textContent: k }),
      Object.assign(document.createElement('dd'), { textContent: v ?? '—' }),
    ]),
  );
  return connection;
}

async function showEvents() {
  const { events } = await (await fetch('/api/events')).json();
  if (!events.length) return;
  $('events').replaceChildren(
    ...events.map((e) =>
      Object.assign(document.createElement('li'), {
        textContent: `${e.type}  ${e.data.connectionId ?? ''}  (${e.source}, ${e.timestamp})`,
      }),
    ),
  );
}

// The user's synced workflows: the backend follows the change feed and sends the list again at every change.
let stream = null;
const versions = new Map();
const changedAt = new Map();

function cell(text, className) {
  return Object.assign(document.createElement('td'), { textContent: text ?? '—', className: className ?? '' });
}

function showRecords(view) {
  const { workflows } = view;
  const feed = [
    view.state === 'following' ? 'Following the change feed' : view.state === 'retrying' ? `Retrying: ${view.error}` : 'Starting…',
    `${workflows.length} workflow${workflows.length === 1 ? '' : 's'}`,
    `${view.changes} change${view.changes === 1 ? '' : 's'} applied`,
  ];
  if (view.resumed) feed.push('resumed from the stored cursor');
  if (view.rereads) feed.push(`copy read again ${view.rereads}× (cursor expired)`);
  if (view.lastChangeAt) feed.push(`last change ${new Date(view.lastChangeAt).toLocaleTimeString()}`);
  $('records-feed').textContent = feed.join(' · ');
  $('records').hidden = workflows.length === 0;
  $('records').tBodies[0].replaceChildren(
    ...workflows.map((w) => {
      const row = document.createElement('tr');
      row.dataset.id = w.id;
      const step = Object.assign(document.createElement('span'), { className: 'step', textContent: w.step });
      const stepCell = cell('');
      stepCell.append(step);
      row.append(cell(w.name), stepCell, cell(String(w.version ?? '—'), 'num'), cell(w.lastModified?.slice(0, 19).replace('T', ' ')));
      // A row that changed (a new version, or a new lastModified at the same version) is marked for a few seconds.
      const seen = `${w.version}|${w.lastModified}|${w.step}|${w.name}`;
      if (versions.has(w.id) && versions.get(w.id) !== seen) changedAt.set(w.id, Date.now());
      versions.set(w.id, seen);
      if (Date.now() - (changedAt.get(w.id) ?? 0) < 4000) {
        row.className = 'changed';
        setTimeout(() => row.classList.remove('changed'), 4000 - (Date.now() - changedAt.get(w.id)));
      }
      return row;
    }),
  );
}

function followRecords(userId) {
  stream?.close();
  stream = new EventSource(`/api/records/stream?userId=${encodeURIComponent(userId)}`);
  stream.onmessage = (m) => showRecords(JSON.parse(m.data));
}

async function connected(connectionId) {
  status(`Connected: ${connectionId}`, true);
  const connection = await showConnection(connectionId);
  followRecords(connection.userId);
}

button.addEventListener('click', async () => {
  button.disabled = true;
  status('Waiting for the consent page…', true);
  try {
    const res = await fetch('/api/connect-sessions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ userId: $('user-id').value }),
    });
    const { connectUrl } = await res.json();
    const { connectionId } = await open(connectUrl);
    await connected(connectionId);
  } catch (e) {
    status(`Not connected: ${e.code ?? e.message}`, false);
  } finally {
    button.disabled = false;
  }
});

// Back from a full-page flow (the browser blocked the popup)?
const back = resultFromUrl();
if (back instanceof Error) status(`Not connected: ${back.code}`, false);
else if (back) await connected(back.connectionId);

button.disabled = false;
setInterval(showEvents, 1000);
