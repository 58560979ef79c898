import { useState, type FormEvent } from "react";
import { useAuth } from "../auth";
import { usePageTitle } from "../components/ui";
import type { ApiError } from "../api/client";

export function SignInPage() {
  const { signIn, notice } = useAuth();
  const [token, setToken] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  usePageTitle("Sign in");

  async function submit(event: FormEvent) {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await signIn(token);
    } catch (caught) {
      setError((caught as ApiError).message);
      setBusy(false);
    }
  }

  return (
    <main className="signin">
      <form className="signin-card" onSubmit={submit}>
        <h1 className="brand big">
          <span className="logo" aria-hidden="true">
            F
          </span>{" "}
          Firstlume
        </h1>
        <p className="muted">Plans reviewed, approvals enforced, applies exactly as planned.</p>
        {notice && !error && <div className="alert alert-warning">{notice}</div>}
        <label htmlFor="token">API token</label>
        <input
          id="token"
          type="password"
          autoComplete="off"
          spellCheck={false}
          placeholder="fl_…"
          value={token}
          onChange={(e) => setToken(e.target.value)}
          autoFocus
        />
        {error && (
          <div className="alert alert-danger" role="alert">
            {error}
          </div>
        )}
        <button className="btn primary block" type="submit" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
        <p className="muted small">
          Create a token with <code>firstlume token create --org &lt;slug&gt; --user &lt;email&gt;</code>. It stays
          in this browser until you sign out.
        </p>
      </form>
    </main>
  );
}
