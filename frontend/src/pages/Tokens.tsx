import { useState, type FormEvent } from "react";
import { useParams } from "react-router";
import { useAction, useApiQuery, useMutate } from "../api/hooks";
import { ConfirmDelete } from "../components/Confirm";
import { Card, Empty, ErrorBox, Loading, TimeAgo, useOrgPageTitle } from "../components/ui";
import { dateTime } from "../format";
import { CreateTokenDocument, RevokeTokenDocument, TokensDocument } from "../graphql/generated";

const LIFETIMES = [
  { value: "7d", label: "7 days" },
  { value: "30d", label: "30 days" },
  { value: "90d", label: "90 days" },
  { value: "", label: "never" },
];

/** The caller's own API tokens: create one (shown once), see when each was last used, revoke. */
export function TokensPage() {
  const { org = "" } = useParams();
  const { data, error, loading, refetch } = useApiQuery(TokensDocument, { org });
  const mutate = useMutate();
  const { busy, error: actionError, run } = useAction();
  const [form, setForm] = useState({ name: "", expiresIn: "30d" });
  const [created, setCreated] = useState<{ name: string; token: string } | null>(null);
  useOrgPageTitle("API tokens");
  if (!data && loading) return <Loading what="your tokens" />;
  if (!data?.organization) return <ErrorBox error={error ?? `There is no organization "${org}" that you are a member of.`} />;
  const tokens = data.viewer.tokens;

  const create = (event: FormEvent) => {
    event.preventDefault();
    void run(async () => {
      const { createToken } = await mutate(CreateTokenDocument, { org, name: form.name.trim(), expiresIn: form.expiresIn || null });
      if (createToken.__typename !== "CreatedToken") return createToken.message;
      setCreated({ name: createToken.info.name, token: createToken.token });
      setForm({ ...form, name: "" });
      await refetch();
    });
  };
  const revoke = (id: string) =>
    run(async () => {
      const { revokeToken } = await mutate(RevokeTokenDocument, { org, id });
      if (revokeToken.__typename !== "Token") return revokeToken.message;
      await refetch();
    });

  return (
    <div className="page">
      <div className="page-head">
        <div>
          <h1>API tokens</h1>
          <p className="muted">
            Your tokens, for the API, the CLI and Terraform's http backend ({data.viewer.email}). Only a hash is stored: a token is shown once, when
            it is created. A revoked or expired token is refused at once, and its open live views close within seconds.
          </p>
        </div>
      </div>
      {created && (
        <div className="card token-once" role="status" data-testid="new-token">
          <p>
            <strong>{created.name}</strong>: copy it now, it will not be shown again.
          </p>
          <code className="mono token-value">{created.token}</code>
          <span className="actions">
            <CopyButton text={created.token} />
            <button className="btn small" onClick={() => setCreated(null)}>
              Done
            </button>
          </span>
        </div>
      )}
      <Card title="Tokens">
        {tokens.length === 0 ? (
          <Empty title="No tokens." />
        ) : (
          <table className="table responsive" data-testid="tokens">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">Expires</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {tokens.map((t) => (
                <tr key={t.id} data-token={t.name}>
                  <td data-label="Name">
                    {t.name || <span className="muted">unnamed</span>}
                    {t.current && (
                      <span className="pill small this-browser" data-testid="this-browser" title="This browser is signed in with this token: revoking it signs you out.">
                        this browser
                      </span>
                    )}
                  </td>
                  <td data-label="Created" title={dateTime(t.createdAt)}>
                    <TimeAgo iso={t.createdAt} />
                  </td>
                  <td data-label="Last used">{t.lastUsedAt ? <TimeAgo iso={t.lastUsedAt} /> : <span className="muted">never</span>}</td>
                  <td data-label="Expires">{t.expiresAt ? dateTime(t.expiresAt) : <span className="muted">never</span>}</td>
                  <td className="right actions-cell">
                    <ConfirmDelete
                      small
                      what="token"
                      verb="Revoke"
                      label="Revoke"
                      ariaLabel={`Revoke ${t.name || t.id}`}
                      name={t.name || undefined}
                      busy={busy}
                      error={null}
                      onDelete={() => void revoke(t.id)}
                      question={
                        <>
                          <strong>Revoke {t.name ? `“${t.name}”` : "this token"}?</strong> It is refused at once and cannot be used again
                          {t.current ? "; this browser is signed in with it and will be signed out" : ""}.
                        </>
                      }
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        <form className="var-form" onSubmit={create} aria-label="Create a token">
          <input aria-label="Token name" placeholder="name, such as ci" value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} required />
          <select aria-label="Expires in" value={form.expiresIn} onChange={(e) => setForm({ ...form, expiresIn: e.target.value })}>
            {LIFETIMES.map((l) => (
              <option key={l.value} value={l.value}>
                expires: {l.label}
              </option>
            ))}
          </select>
          <button className="btn primary" type="submit" disabled={busy}>
            Create token
          </button>
        </form>
        <ErrorBox error={actionError} />
      </Card>
    </div>
  );
}

/** Copies a new token to the clipboard, and says so (or says to copy it by hand). */
function CopyButton({ text }: { text: string }) {
  const [copied, setCopied] = useState<"yes" | "no" | null>(null);
  return (
    <>
      <button
        type="button"
        className="btn small primary"
        onClick={() =>
          void navigator.clipboard.writeText(text).then(
            () => setCopied("yes"),
            () => setCopied("no"),
          )
        }
      >
        Copy
      </button>
      <span className="saved" role="status" data-testid="copied">
        {copied === "yes" ? "✓ Copied" : copied === "no" ? "Copy it by hand: the browser refused." : ""}
      </span>
    </>
  );
}
