import { useState, type FormEvent } from 'react';
import { api, ApiError } from '../api';
import { ErrorNote, Heading } from '../components';

export function SignIn({ onSignedIn, notice }: { onSignedIn: () => void; notice: string | null }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  async function submit(e: FormEvent) {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api.signIn(key);
      setKey('');
      onSignedIn();
    } catch (err) {
      setError(
        err instanceof ApiError && err.status === 401 ? 'That is not the operator key.' : `Sign-in failed: ${(err as Error).message}`,
      );
    } finally {
      setBusy(false);
    }
  }

  return (
    <main id="main" className="sign-in">
      <p className="brand">cws-connect</p>
      <Heading>Sign in to the cws-connect console</Heading>
      {notice ? <p className="note">{notice}</p> : null}
      <form onSubmit={submit}>
        <label htmlFor="operator-key">Operator key</label>
        <input
          id="operator-key"
          name="operatorKey"
          type="password"
          autoComplete="off"
          spellCheck={false}
          required
          value={key}
          onChange={(e) => setKey(e.target.value)}
          aria-describedby="operator-key-help"
        />
        <p id="operator-key-help" className="help">
          The service's <code>OPERATOR_API_KEY</code> (printed at the first start outside production). It stays on the server: the browser
          keeps only a session cookie.
        </p>
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
      <ErrorNote error={error} />
    </main>
  );
}
