import { useEffect, useState, type FormEvent } from "react";
import { useAuth } from "../auth";
import { usePageTitle } from "../components/ui";
import { singleSignOn, type ApiError, type SingleSignOn } from "../api/client";

export function SignInPage() {
  const { signIn, notice } = useAuth();
  const [token, setToken] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [sso, setSso] = useState<SingleSignOn | null>(null);
  usePageTitle("Sign in");
  useEffect(() => {
    let live = true;
    singleSignOn().then((found) => live && setSso(found));
    return () => {
      live = false;
    };
  }, []);

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
        {sso?.enabled && sso.sign_in_url && (
          <>
            {/* A whole-page visit: the provider's page, then back to this address with the session cookie. */}
            <a
              className="btn primary block"
              href={`${sso.sign_in_url}?next=${encodeURIComponent(window.location.pathname + window.location.search)}`}
            >
              Sign in with {sso.issuer}
            </a>
            <p className="muted small">Or, for a machine's or a break-glass sign-in, paste an API token:</p>
          </>
        )}
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
