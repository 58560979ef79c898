import { useState } from "react";
import { Link, useParams } from "react-router";
import { useAction, useApiQuery, useLiveSubscription, useMutate } from "../api/hooks";
import { Card, Empty, ErrorBox, Loading, TimeAgo, useOrgPageTitle } from "../components/ui";
import { shortSha } from "../format";
import {
  GitDeliveriesLiveDocument,
  GitDeliveriesPageDocument,
  RotateWebhookSecretDocument,
  type GitDeliveriesLiveSubscription,
} from "../graphql/generated";

type Delivery = GitDeliveriesLiveSubscription["gitDeliveries"][number];

/** The organization's Git deliveries: webhook deliveries (accepted, ignored or refused) and polls
 * that found a new head, newest first; and the webhook URL with its write-only secret. */
export function GitDeliveriesPage() {
  const { org = "" } = useParams();
  useOrgPageTitle("Git deliveries");
  const [refresh, setRefresh] = useState(0);
  const { data, error, loading } = useApiQuery(GitDeliveriesPageDocument, { org }, { refreshKey: refresh });
  // Deliveries arrive from outside (hosts, polls): the list follows them live.
  const [live, setLive] = useState<Delivery[] | null>(null);
  useLiveSubscription(GitDeliveriesLiveDocument, { org }, { next: (update) => setLive(update.gitDeliveries) });
  const mutate = useMutate();
  const action = useAction();
  const [secret, setSecret] = useState<string | null>(null);
  const organization = data?.organization;
  const webhookUrl = `${window.location.origin}/api/v1/orgs/${org}/git/webhook`;

  async function rotate() {
    await action.run(async () => {
      const { rotateWebhookSecret } = await mutate(RotateWebhookSecretDocument, { org });
      if (rotateWebhookSecret.__typename !== "WebhookSecret") return rotateWebhookSecret.message;
      setSecret(rotateWebhookSecret.secret);
      setRefresh((n) => n + 1);
    });
  }

  if (!data && loading) return <Loading what="the Git deliveries" />;
  if (error && !data) return <ErrorBox error={error} />;
  if (!organization) return <ErrorBox error={`There is no organization “${org}” here.`} />;
  const deliveries: Delivery[] = live ?? organization.gitDeliveries;

  return (
    <div className="page">
      <div className="page-head">
        <div>
          <h1>Git deliveries</h1>
          <p className="muted small">Pushes that reached Firstlume by webhook or by polling, newest first (the last 100).</p>
        </div>
        <div className="actions">
          <button className="btn" onClick={() => setRefresh((n) => n + 1)}>
            Refresh
          </button>
        </div>
      </div>
      <Card title="Webhook" className="webhook-card">
        <dl className="facts">
          <div>
            <dt>Payload URL (GitHub, Gitea, Forgejo, GitLab)</dt>
            <dd className="mono wrap-anywhere" data-testid="webhook-url">
              {webhookUrl}
            </dd>
          </div>
          <div>
            <dt>Secret</dt>
            <dd data-testid="webhook-secret-state">
              {organization.webhookSecretSetAt ? (
                <>
                  set <TimeAgo iso={organization.webhookSecretSetAt} />
                </>
              ) : (
                "not set: every delivery is refused"
              )}
            </dd>
          </div>
        </dl>
        {secret && (
          <div className="alert" role="status" data-testid="new-secret">
            <div>
              <strong>The new secret, shown this once:</strong> <code className="wrap-anywhere">{secret}</code>
            </div>
            <div className="small muted">Paste it in the host's webhook settings; the previous secret no longer signs.</div>
          </div>
        )}
        {organization.viewerCan.rotateWebhookSecret && (
          <div className="actions">
            <button className="btn" disabled={action.busy} onClick={() => void rotate()}>
              {organization.webhookSecretSetAt ? "Rotate the secret" : "Create a secret"}
            </button>
          </div>
        )}
        <ErrorBox error={action.error} title="The secret was not changed." />
      </Card>
      <Card title="Deliveries">
        {deliveries.length === 0 ? (
          <Empty title="No deliveries yet.">Push to a branch a stack follows, with its trigger set to plan or apply.</Empty>
        ) : (
          <div className="table-box">
            <table className="table responsive deliveries-table" data-testid="deliveries">
              <thead>
                <tr>
                  <th scope="col">Received</th>
                  <th scope="col">Source</th>
                  <th scope="col">Repository</th>
                  <th scope="col">Ref</th>
                  <th scope="col">Head</th>
                  <th scope="col">Result</th>
                </tr>
              </thead>
              <tbody>
                {deliveries.map((d) => (
                  <tr key={d.id} className={d.httpStatus >= 400 ? "attention" : ""}>
                    <td data-label="Received" className="small nowrap">
                      <TimeAgo iso={d.receivedAt} />
                    </td>
                    <td data-label="Source" className="small">
                      {d.source}
                      {d.delivery && <div className="muted mono wrap-anywhere">{d.delivery}</div>}
                    </td>
                    <td data-label="Repo" className="small mono wrap-anywhere">
                      {d.repository ?? "—"}
                    </td>
                    <td data-label="Ref" className="small mono wrap-anywhere">
                      {d.ref ?? "—"}
                    </td>
                    <td data-label="Head" className="small mono">
                      {d.head ? shortSha(d.head) : "—"}
                    </td>
                    <td data-label="Result" className="small">
                      <span className={d.httpStatus >= 400 ? "danger-text" : ""}>{d.outcome}</span>
                      {d.runs.length > 0 && (
                        <div>
                          {d.runs.map((id) => (
                            <Link key={id} to={`/orgs/${org}/runs/${id}`} className="mono run-chip">
                              run {id.slice(0, 8)}
                            </Link>
                          ))}
                        </div>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Card>
    </div>
  );
}
