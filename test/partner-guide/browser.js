import { open, CwsConnectError } from 'http://localhost:3000/sdk/connect-browser.js';

const status = document.querySelector('#status');
document.querySelector('#connect').addEventListener('click', async () => {
  // Your backend makes the link for the signed-in user (POST /connect below); open it from the click itself.
  const { connectUrl } = await (await fetch('/connect', { method: 'POST' })).json();
  try {
    const { connectionId } = await open(connectUrl);
    status.textContent = `Connected (${connectionId})`;
  } catch (e) {
    if (!(e instanceof CwsConnectError)) throw e;
    status.textContent = `Not connected: ${e.code}`; // access_denied, not_admin, expired, closed, …
  }
});
