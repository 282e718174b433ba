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

async function connected(connectionId) {
  status(`Connected: ${connectionId}`, true);
  await showConnection(connectionId);
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
