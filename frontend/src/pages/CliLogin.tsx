import { useEffect, useState } from "react";
import { useSearchParams } from "react-router";
import { authHeaders } from "../api/client";
import { useAuth } from "../auth";
import { ErrorBox, Loading, usePageTitle } from "../components/ui";

type OAuthAnswer = { error?: string; error_description?: string; redirect?: string; error_message?: string };

async function answerOf(response: Response): Promise<OAuthAnswer> {
  try {
    return (await response.json()) as OAuthAnswer;
  } catch {
    return { error: "server_error", error_description: `The server answered ${response.status}. Try again.` };
  }
}

function describe(answer: OAuthAnswer & { error?: unknown }): string {
  if (answer.error_description) return answer.error_description;
  const nested = answer.error as { message?: string } | string | undefined;
  if (nested && typeof nested === "object" && nested.message) return nested.message;
  return "The request was refused. Run terraform login again.";
}

/** `terraform login`'s authorization page: who asks for what, Allow or Deny. Signed in as for
 * any page; the address (the CLI's) is checked by the server before Allow is offered. */
export function CliLoginPage() {
  const { token, viewer } = useAuth();
  const [params] = useSearchParams();
  const [problem, setProblem] = useState<string | null>(null);
  const [checked, setChecked] = useState(false);
  const [org, setOrg] = useState("");
  const [busy, setBusy] = useState(false);
  usePageTitle("terraform login");
  const query = params.toString();

  useEffect(() => {
    let live = true;
    fetch(`/api/v1/cli-login/check?${query}`).then(async (response) => {
      if (!live) return;
      if (!response.ok) setProblem(describe(await answerOf(response)));
      setChecked(true);
    });
    return () => {
      live = false;
    };
  }, [query]);
  useEffect(() => {
    if (viewer && !org && viewer.organizations[0]) setOrg(viewer.organizations[0].slug);
  }, [viewer, org]);

  if (!checked || !viewer || !token) return <Loading what="the login request" />;
  const orgs = viewer.organizations;

  async function decide(allow: boolean) {
    setBusy(true);
    const body: Record<string, unknown> = { allow };
    params.forEach((value, name) => (body[name] = value));
    const response = await fetch(`/api/v1/orgs/${encodeURIComponent(org)}/cli-login`, {
      method: "POST",
      credentials: "same-origin",
      headers: { ...authHeaders(token as string), "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const answer = await answerOf(response);
    if (response.ok && answer.redirect) {
      window.location.assign(answer.redirect);
      return;
    }
    setProblem(describe(answer));
    setBusy(false);
  }

  const chosen = orgs.find((o) => o.slug === org);
  return (
    <main className="signin">
      <div className="signin-card">
        <h1>terraform login</h1>
        {problem ? (
          <ErrorBox error={problem} title="This login cannot go on." />
        ) : orgs.length === 0 ? (
          <ErrorBox error={`${viewer.email} belongs to no organization: there is nothing to log in to.`} />
        ) : (
          <>
            <p data-testid="cli-login-ask">
              <strong>terraform login</strong> wants a token for <strong>{viewer.email}</strong> in{" "}
              <strong>{chosen?.name ?? org}</strong>.
            </p>
            <p className="muted small">
              Terraform on this computer gets an API token named “terraform login”, which acts as you in your organizations. It is listed
              on your API tokens page, where you can revoke it. Allow only a login you started yourself.
            </p>
            {orgs.length > 1 && (
              <>
                <label htmlFor="cli-login-org">Organization</label>
                <select id="cli-login-org" value={org} onChange={(e) => setOrg(e.target.value)}>
                  {orgs.map((o) => (
                    <option key={o.slug} value={o.slug}>
                      {o.name}
                    </option>
                  ))}
                </select>
              </>
            )}
            <div className="actions">
              <button className="btn primary" type="button" disabled={busy} onClick={() => void decide(true)}>
                Allow
              </button>
              <button className="btn" type="button" disabled={busy} onClick={() => void decide(false)}>
                Deny
              </button>
            </div>
          </>
        )}
      </div>
    </main>
  );
}
