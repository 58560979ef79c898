import { useState } from "react";
import { Link, useParams, useSearchParams } from "react-router";
import { useAction, useApiQuery, useMutate } from "../api/hooks";
import { useAuth } from "../auth";
import { downloadFile } from "../download";
import { Card, Empty, ErrorBox, Loading, NotFoundPage, TimeAgo, usePageTitle } from "../components/ui";
import { shortSha } from "../format";
import { ForceUnlockDocument, StackStateDocument, type StackStateViewFragment } from "../graphql/generated";
import { StackHeader } from "./Stack";

const OPTIONAL = ["outputs"] as const;

type Version = StackStateViewFragment["versions"][number];
type Lock = NonNullable<StackStateViewFragment["lock"]>;

/** A stack's managed state: the lock and who holds it, the outputs, and every version kept. */
export function StackStatePage() {
  const { org = "", slug = "" } = useParams();
  const [params] = useSearchParams();
  const unit = params.get("unit") || ".";
  // Outputs need the operator role: a reader's refusal hides that card alone, not the page.
  const { data, error, loading, refetch, refused } = useApiQuery(StackStateDocument, { org, slug, unit }, { optional: OPTIONAL });
  const stack = data?.organization?.stack;
  usePageTitle("State", stack ? stack.name || stack.slug : slug, "Stacks");

  if (!data && loading) return <Loading what="the state" />;
  if (error && !data) return <ErrorBox error={error} />;
  if (!stack) return <NotFoundPage title={`There is no stack “${slug}” here.`} back={`/orgs/${org}/stacks`} backLabel="All stacks" />;
  const state = stack.state;
  const units = stack.states.map((s) => s.unit);

  return (
    <div className="page state-page">
      <StackHeader org={org} slug={slug} folder={stack.folder?.path} title={stack.name || stack.slug} />
      {(units.length > 1 || unit !== ".") && (
        <nav className="unit-picker" aria-label="Terragrunt units">
          {[...new Set([".", ...units])].map((u) => (
            <Link key={u} className={`btn small ${u === unit ? "primary" : ""}`} aria-current={u === unit ? "page" : undefined} to={u === "." ? "?" : `?unit=${encodeURIComponent(u)}`}>
              {u === "." ? "Root module" : u}
            </Link>
          ))}
        </nav>
      )}
      <ErrorBox error={error} />
      {state.serial === null && state.versions.length === 0 ? (
        <Card>
          <Empty title="No state yet.">
            A stack whose code declares no backend keeps its state here from its first apply. Terraform can also use it
            directly: the <code>http</code> backend at <code className="wrap">/api/v1/orgs/{org}/stacks/{slug}/state</code>.
          </Empty>
        </Card>
      ) : (
        <dl className="facts">
          <div>
            <dt>Serial</dt>
            <dd className="mono" data-testid="state-serial">{state.serial ?? "—"}</dd>
          </div>
          <div>
            <dt>Lineage</dt>
            <dd className="mono wrap">{state.lineage ?? "—"}</dd>
          </div>
          <div>
            <dt>Resources</dt>
            <dd>{state.versions[0]?.resources ?? 0}</dd>
          </div>
        </dl>
      )}
      <LockCard org={org} slug={slug} unit={unit} lock={state.lock} onUnlocked={refetch} mayUnlock={stack.viewerCan.forceUnlock} />
      <Card title="Outputs">
        {state.outputs === null || state.outputs === undefined ? (
          <p className="muted" data-testid="outputs-hidden">
            Outputs are visible to operators and admins. {refused.outputs ?? ""}
          </p>
        ) : state.outputs.length === 0 ? (
          <Empty title="No outputs." />
        ) : (
          <div className="table-box">
            <table className="table responsive outputs-table">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Type</th>
                  <th scope="col">Value</th>
                </tr>
              </thead>
              <tbody>
                {state.outputs.map((output) => (
                  <tr key={output.name}>
                    <td data-label="Name" className="mono">{output.name}</td>
                    <td data-label="Type" className="mono small">{typeText(output.type)}</td>
                    <td data-label="Value" className={`mono wrap ${output.sensitive ? "muted" : ""}`}>
                      {output.sensitive ? "(sensitive)" : valueText(output.value)}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Card>
      <Card title={`Versions${state.versions.length ? ` (${state.versions.length}${state.versions.length === 50 ? "+" : ""})` : ""}`}>
        {state.versions.length === 0 ? <Empty title="No versions." /> : <VersionTable org={org} slug={slug} unit={unit} versions={state.versions} />}
      </Card>
    </div>
  );
}

function LockCard({
  org,
  slug,
  unit,
  lock,
  onUnlocked,
  mayUnlock,
}: {
  org: string;
  slug: string;
  unit: string;
  lock: Lock | null;
  onUnlocked: () => Promise<void>;
  /** Force-unlock is offered only to those the server says may (admins). */
  mayUnlock: boolean;
}) {
  const mutate = useMutate();
  const action = useAction();
  const [confirming, setConfirming] = useState(false);

  async function forceUnlock() {
    await action.run(async () => {
      const { forceUnlock } = await mutate(ForceUnlockDocument, { org, stack: slug, unit });
      if (forceUnlock.__typename !== "StackState") return forceUnlock.message;
      setConfirming(false);
      await onUnlocked();
    });
  }

  return (
    <Card title="Lock">
      {lock === null ? (
        <p className="muted" data-testid="lock-state">Not locked.</p>
      ) : (
        <div className="lock" data-testid="lock-state">
          <p>
            <strong>Locked by {lock.runId ? <Link to={`/orgs/${org}/runs/${lock.runId}`}>{lock.holder}</Link> : lock.holder}</strong>
            {lock.lockedAt && (
              <>
                {" "}
                since <TimeAgo iso={lock.lockedAt} />
              </>
            )}
            .
          </p>
          <p className="small muted wrap">
            Lock <span className="mono">{lock.id}</span>
            {lock.operation && <> · {lock.operation.replace(/^OperationType/, "")}</>}
            {lock.who && <> · {lock.who}</>}
          </p>
          {confirming ? (
            <div className="alert alert-danger confirm">
              <div>
                <strong>Force-unlock the state?</strong> Whoever holds the lock may still be writing; only do this when it is
                stuck. Admins only.
              </div>
              <div className="actions">
                <button className="btn" onClick={() => setConfirming(false)}>
                  Keep the lock
                </button>
                <button className="btn danger" disabled={action.busy} onClick={() => void forceUnlock()}>
                  {action.busy ? "Unlocking…" : "Force-unlock"}
                </button>
              </div>
            </div>
          ) : (
            mayUnlock && (
              <button className="btn danger-outline" onClick={() => setConfirming(true)}>
                Force-unlock…
              </button>
            )
          )}
          <ErrorBox error={action.error} title="The lock was not released." />
        </div>
      )}
    </Card>
  );
}

function VersionTable({ org, slug, unit, versions }: { org: string; slug: string; unit: string; versions: Version[] }) {
  const { token } = useAuth();
  const [problem, setProblem] = useState<string | null>(null);

  async function download(version: Version) {
    setProblem(null);
    const base = `/api/v1/orgs/${encodeURIComponent(org)}/stacks/${encodeURIComponent(slug)}`;
    const path = `${base}${unit === "." ? "" : `/units/${unit.split("/").map(encodeURIComponent).join("/")}`}/state/versions/${version.serial}`;
    try {
      await downloadFile(path, token ?? "", `${slug}${unit === "." ? "" : `-${unit.replaceAll("/", "-")}`}-${version.serial}.tfstate`, "the state");
    } catch (caught) {
      setProblem(caught instanceof Error ? caught.message : String(caught));
    }
  }

  return (
    <>
      <ErrorBox error={problem} title="The version was not downloaded." />
      <div className="table-box">
        <table className="table responsive versions-table">
          <thead>
            <tr>
              <th scope="col">Serial</th>
              <th scope="col">Written</th>
              <th scope="col">By</th>
              <th scope="col">Resources</th>
              <th scope="col">SHA-256</th>
              <th scope="col">
                <span className="sr-only">Download</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {versions.map((version) => (
              <tr key={version.serial} data-serial={version.serial}>
                <td data-label="Serial" className="mono">{version.serial}</td>
                <td data-label="Written" className="small nowrap">
                  <TimeAgo iso={version.createdAt} />
                </td>
                <td data-label="By" className="small by-cell">
                  {version.runId ? <Link to={`/orgs/${org}/runs/${version.runId}`}>{version.createdBy}</Link> : version.createdBy}
                </td>
                <td data-label="Resources" className="small">{version.resources}</td>
                <td data-label="SHA-256" className="mono small" title={version.sha256}>
                  {shortSha(version.sha256)}
                </td>
                <td className="actions-cell">
                  <button className="btn small" onClick={() => void download(version)} aria-label={`Download version ${version.serial}`}>
                    Download
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}

function typeText(type: unknown): string {
  return typeof type === "string" ? type : JSON.stringify(type);
}

function valueText(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}
