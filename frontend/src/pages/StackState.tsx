import { useEffect, useState, type FormEvent } from "react";
import { Link, useParams, useSearchParams } from "react-router";
import { useAction, useApiQuery, useMutate } from "../api/hooks";
import { useAuth } from "../auth";
import { downloadFile } from "../download";
import { Card, Empty, ErrorBox, Loading, NotFoundPage, TimeAgo, usePageTitle } from "../components/ui";
import { typeText } from "../data/terraformType";
import { shortSha } from "../format";
import { ForceUnlockDocument, StackStateDocument, StateDiffDocument, StateResourcesDocument, type StackStateViewFragment } from "../graphql/generated";
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
      {state.serial !== null && <ResourcesCard org={org} slug={slug} unit={unit} />}
      {state.versions.length > 1 && <DiffCard org={org} slug={slug} unit={unit} versions={state.versions} />}
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

function valueText(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

const RESOURCES_PAGE = 100;

/** The current version's resources, a page at a time (a state may hold 10,000), found by part of a name. */
function ResourcesCard({ org, slug, unit }: { org: string; slug: string; unit: string }) {
  const [search, setSearch] = useState("");
  const [draft, setDraft] = useState("");
  const [offset, setOffset] = useState(0);
  const { data, error, loading } = useApiQuery(StateResourcesDocument, { org, slug, unit, first: RESOURCES_PAGE, offset, search: search || null });
  const page = data?.organization?.stack?.state.resources;
  // Typing narrows the list once the typing pauses.
  useEffect(() => {
    if (draft.trim() === search) return;
    const timer = window.setTimeout(() => {
      setSearch(draft.trim());
      setOffset(0);
    }, 250);
    return () => window.clearTimeout(timer);
  }, [draft, search]);

  // What is on screen is the server's answer: its offset, not the one asked for meanwhile.
  const total = page?.totalCount ?? 0;
  const shownFrom = page?.offset ?? 0;
  const last = Math.min(shownFrom + RESOURCES_PAGE, total);
  return (
    <Card title={`Resources${page && !search ? ` (${total.toLocaleString()})` : ""}`}>
      <div className="filters resource-filters">
        <input type="search" aria-label="Find resources by address, type or provider" placeholder="Find by address, type or provider" value={draft} onChange={(e) => setDraft(e.target.value)} />
        {page && (
          <span className="small muted" role="status" data-testid="resources-range">
            {total === 0 ? "No resources" : `${(shownFrom + 1).toLocaleString()}–${last.toLocaleString()} of ${total.toLocaleString()}`}
            {search && " matching"}
          </span>
        )}
      </div>
      <ErrorBox error={error} />
      {!page && loading && <Loading what="the resources" />}
      {page && page.nodes.length > 0 && (
        <div className="table-box">
          <table className="table responsive resources-table">
            <thead>
              <tr>
                <th scope="col">Address</th>
                <th scope="col">Type</th>
                <th scope="col">Provider</th>
              </tr>
            </thead>
            <tbody>
              {page.nodes.map((r) => (
                <tr key={r.address} data-address={r.address}>
                  <td data-label="Address" className="mono wrap">{r.address}</td>
                  <td data-label="Type" className="mono small">{r.type}</td>
                  <td data-label="Provider" className="small wrap">{r.provider}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {total > RESOURCES_PAGE && (
        <div className="pager">
          <button className="btn small" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - RESOURCES_PAGE))}>
            Previous
          </button>
          <button className="btn small" disabled={offset + RESOURCES_PAGE >= total} onClick={() => setOffset(offset + RESOURCES_PAGE)}>
            Next
          </button>
        </div>
      )}
    </Card>
  );
}

/** What one version changed against another (by serial): resources added, removed and changed, never values. */
function DiffCard({ org, slug, unit, versions }: { org: string; slug: string; unit: string; versions: Version[] }) {
  const [chosen, setChosen] = useState({ from: versions[1].serial, to: versions[0].serial });
  const [asked, setAsked] = useState<{ from: number; to: number } | null>(null);
  const { data, error, loading } = useApiQuery(StateDiffDocument, { org, slug, unit, from: asked?.from ?? 0, to: asked?.to ?? 0 }, { pause: asked === null });
  const diff = asked ? data?.organization?.stack?.state.diff : undefined;

  function submit(event: FormEvent) {
    event.preventDefault();
    setAsked(chosen);
  }

  const picker = (name: "from" | "to", label: string) => (
    <label>
      {label}
      <select value={chosen[name]} onChange={(e) => setChosen({ ...chosen, [name]: Number(e.target.value) })}>
        {versions.map((v) => (
          <option key={v.serial} value={v.serial}>
            Serial {v.serial}
          </option>
        ))}
      </select>
    </label>
  );

  return (
    <Card title="Compare versions">
      <form className="form-row diff-form" onSubmit={submit} aria-label="Compare two state versions">
        {picker("from", "From")}
        {picker("to", "To")}
        <button className="btn primary" type="submit" disabled={chosen.from === chosen.to}>
          Compare
        </button>
      </form>
      <ErrorBox error={error} title="The versions were not compared." />
      {asked && !diff && loading && <Loading what="the difference" />}
      {diff && diff.fromSerial === asked?.from && diff.toSerial === asked?.to && (
        <div className="state-diff" data-testid="state-diff">
          <p className="small" data-testid="diff-summary">
            Serial {diff.fromSerial} → {diff.toSerial}: {diff.addedCount} added, {diff.removedCount} removed, {diff.changedCount} changed.
          </p>
          {(
            [
              ["added", "Added", diff.added, diff.addedCount, "success"],
              ["removed", "Removed", diff.removed, diff.removedCount, "danger"],
              ["changed", "Changed", diff.changed, diff.changedCount, "warning"],
            ] as const
          ).map(([key, title, list, count, tone]) =>
            count === 0 ? null : (
              <section key={key} data-diff={key}>
                <h3 className={`small tone-text-${tone}`}>
                  {title} ({count})
                </h3>
                <ul className="diff-list">
                  {list.map((r) => (
                    <li key={r.address} className="mono wrap">
                      {r.address}
                    </li>
                  ))}
                  {count > list.length && <li className="muted small">and {count - list.length} more</li>}
                </ul>
              </section>
            ),
          )}
        </div>
      )}
    </Card>
  );
}
