import { useEffect, useState, type FormEvent } from "react";
import { Link, useParams, useSearchParams } from "react-router";
import { useClient } from "urql";
import { useApiQuery } from "../api/hooks";
import { Card, Empty, ErrorBox, Loading, TimeAgo, useOrgPageTitle } from "../components/ui";
import { isRoleRefusal, RoleNotice } from "../components/RoleNotice";
import { AuditDocument, type AuditQuery } from "../graphql/generated";

type Entry = NonNullable<AuditQuery["organization"]>["audit"]["nodes"][number];

const PAGE = 50;

// The audited actions (domain/audit.py), grouped for the filter.
const ACTIONS: [string, string[]][] = [
  ["Runs", ["run.start", "run.approve", "run.discard", "run.cancel"]],
  ["Settings and variables", ["settings.update", "variable.set", "variable.delete"]],
  ["Stacks and folders", ["stack.create", "stack.update", "stack.delete", "folder.create", "folder.update", "folder.delete"]],
  ["State", ["state.write", "state.force_unlock", "state.delete"]],
  ["Access", ["organization.create", "token.create", "token.revoke", "member.update", "member.remove", "git.webhook_secret.rotate"]],
  ["Notifications", ["notification.create", "notification.update", "notification.delete"]],
];

/** A date input's day as the start of that day, UTC (the trail's times are UTC). */
function dayStart(day: string, plusDays = 0): string | undefined {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) return undefined;
  const date = new Date(`${day}T00:00:00Z`);
  date.setUTCDate(date.getUTCDate() + plusDays);
  return date.toISOString();
}

/** The organization's audit trail: who changed what, when, through which door; filterable. */
export function AuditPage() {
  const { org = "" } = useParams();
  const [params, setParams] = useSearchParams();
  const filters = {
    actor: params.get("actor") ?? "",
    action: params.get("action") ?? "",
    stack: params.get("stack") ?? "",
    from: params.get("from") ?? "",
    to: params.get("to") ?? "",
  };
  useOrgPageTitle("Audit");
  const variables = {
    org,
    first: PAGE,
    actor: filters.actor ? [filters.actor] : null,
    action: filters.action ? [filters.action] : null,
    stack: filters.stack ? [filters.stack] : null,
    since: dayStart(filters.from) ?? null,
    until: dayStart(filters.to, 1) ?? null,
  };
  const { data, error, loading } = useApiQuery(AuditDocument, variables);
  const client = useClient();
  const [more, setMore] = useState<{ entries: Entry[]; cursor: string | null; error: string | null }>({ entries: [], cursor: null, error: null });
  const [busy, setBusy] = useState(false);
  const audit = data?.organization?.audit;
  const key = JSON.stringify(variables);
  useEffect(() => setMore({ entries: [], cursor: null, error: null }), [key]);

  // The first page comes from the query; older pages are appended below it.
  const cursor = more.entries.length ? more.cursor : (audit?.pageInfo.endCursor ?? null);
  const hasMore = more.entries.length ? more.cursor !== null : Boolean(audit?.pageInfo.hasNextPage);

  async function loadMore() {
    setBusy(true);
    const result = await client.query(AuditDocument, { ...variables, after: cursor }, { requestPolicy: "network-only" }).toPromise();
    setBusy(false);
    const page = result.data?.organization?.audit;
    if (!page) {
      setMore({ ...more, error: result.error?.message ?? "The next page could not be read." });
      return;
    }
    setMore({ entries: [...more.entries, ...page.nodes], cursor: page.pageInfo.hasNextPage ? page.pageInfo.endCursor ?? null : null, error: null });
  }

  function apply(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const next = new URLSearchParams();
    for (const name of ["actor", "action", "stack", "from", "to"]) {
      const value = String(form.get(name) ?? "").trim();
      if (value) next.set(name, value);
    }
    setParams(next);
  }

  const entries = [...(audit?.nodes ?? []), ...more.entries];
  const filtered = Object.values(filters).some(Boolean);
  return (
    <div className="page audit-page">
      <div className="page-head">
        <div>
          <h1>Audit</h1>
          <p className="muted">Every change made through the API, GraphQL or the CLI: who, what, when. Variable values and secrets are never recorded.</p>
        </div>
      </div>
      <form className="audit-filters" onSubmit={apply} key={params.toString()} aria-label="Filter the audit trail">
        <div className="audit-field">
          <label htmlFor="audit-actor">Actor</label>
          <input id="audit-actor" name="actor" defaultValue={filters.actor} placeholder="ada@example.com or system" />
        </div>
        <div className="audit-field">
          <label htmlFor="audit-action">Action</label>
          <select id="audit-action" name="action" defaultValue={filters.action}>
            <option value="">Any action</option>
            {ACTIONS.map(([group, names]) => (
              <optgroup key={group} label={group}>
                {names.map((name) => (
                  <option key={name} value={name}>
                    {name}
                  </option>
                ))}
              </optgroup>
            ))}
          </select>
        </div>
        <div className="audit-field">
          <label htmlFor="audit-stack">Stack</label>
          <input id="audit-stack" name="stack" defaultValue={filters.stack} placeholder="slug" />
        </div>
        <div className="audit-field">
          <label htmlFor="audit-from">From (UTC)</label>
          <input id="audit-from" name="from" type="date" defaultValue={filters.from} />
        </div>
        <div className="audit-field">
          <label htmlFor="audit-to">To (UTC)</label>
          <input id="audit-to" name="to" type="date" defaultValue={filters.to} />
        </div>
        <div className="audit-filter-actions">
          <button className="btn primary" type="submit">
            Filter
          </button>
          {filtered && (
            <Link className="btn ghost" to="?">
              Clear
            </Link>
          )}
        </div>
      </form>
      {isRoleRefusal(error) ? (
        <RoleNotice error={error}>The audit trail is shown to admins only.</RoleNotice>
      ) : (
        <ErrorBox error={error} />
      )}
      {isRoleRefusal(error) ? null : !data && loading ? (
        <Loading what="the audit trail" />
      ) : (
        <Card>
          {entries.length === 0 ? (
            <Empty title={filtered ? "No change matches these filters." : "No changes recorded yet."} />
          ) : (
            <div className="table-box">
              <table className="table responsive audit-table" data-testid="audit-table">
                <thead>
                  <tr>
                    <th scope="col">When</th>
                    <th scope="col">Actor</th>
                    <th scope="col">Action</th>
                    <th scope="col">Target</th>
                    <th scope="col">Details</th>
                    <th scope="col">Via</th>
                  </tr>
                </thead>
                <tbody>
                  {entries.map((entry) => (
                    <tr key={entry.id} data-testid="audit-entry">
                      <td data-label="When" className="nowrap">
                        {/* Relative, with the absolute UTC time on hover (and for screen readers). */}
                        <TimeAgo iso={entry.time} />
                      </td>
                      <td data-label="Actor" className="audit-actor">{entry.actor}</td>
                      <td data-label="Action" className="mono small">{entry.action}</td>
                      <td data-label="Target" className="mono small wrap">
                        <Target org={org} entry={entry} />
                      </td>
                      <td data-label="Details" className="small wrap">{detailsText(entry)}</td>
                      <td data-label="Via" className="muted small" title={entry.requestId ? `request ${entry.requestId}` : undefined}>
                        {entry.via}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </Card>
      )}
      <ErrorBox error={more.error} />
      {hasMore && (
        <p className="load-more">
          <button className="btn" onClick={loadMore} disabled={busy}>
            {busy ? "Loading…" : "Older changes"}
          </button>
        </p>
      )}
    </div>
  );
}

/** What the change is about, by name: a run is its stack and number ("network #12"), not its id. */
function Target({ org, entry }: { org: string; entry: Entry }) {
  const [kind, ...rest] = entry.target.split(":");
  const name = rest.join(":");
  const number = (entry.details as Record<string, unknown> | null)?.number;
  if (kind === "run") {
    const label = entry.stack && typeof number === "number" ? `${entry.stack} #${number}` : `run ${name.slice(0, 8)}`;
    return (
      <Link to={`/orgs/${org}/runs/${name}`} title={`Run ${name}`} data-testid="audit-run">
        {label}
      </Link>
    );
  }
  if (kind === "stack") return <Link to={`/orgs/${org}/stacks/${name}`}>{entry.target}</Link>;
  return <>{entry.target}</>;
}

function shown(value: unknown): string {
  if (value === null || value === undefined) return "—";
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** The details in a line a person reads; names only, as recorded. */
export function detailsText(entry: Entry): string {
  const details = (entry.details ?? {}) as Record<string, unknown>;
  if (entry.action === "settings.update" && Array.isArray(details.changes)) {
    return (details.changes as { setting: string; old?: unknown; new?: unknown }[])
      .map((c) => ("new" in c ? `${c.setting}: ${shown(c.old)} → ${shown(c.new)}` : `${c.setting} changed`))
      .join("; ");
  }
  if (entry.action.startsWith("variable.")) {
    return `${details.name ?? ""} at ${details.scope ?? ""}${details.sensitive ? " (sensitive)" : ""}`;
  }
  if (entry.action.startsWith("run.") && typeof details.number === "number") {
    // The target already names the run (stack and number).
    const parts: string[] = [];
    if (details.type) parts.push(String(details.type));
    if (details.trigger) parts.push(`by ${shown(details.by)}`);
    if (details.was) parts.push(`was ${shown(details.was)}`);
    if (details.approvals) parts.push(`approval ${shown(details.approvals)}`);
    if (Array.isArray(details.acknowledged) && details.acknowledged.length > 0)
      parts.push(`confirmed ${(details.acknowledged as string[]).join(", ")}`);
    if (details.comment) parts.push(`“${shown(details.comment)}”`);
    return parts.join(" · ") || "—";
  }
  return Object.entries(details)
    .filter(([, value]) => value !== null && !(Array.isArray(value) && value.length === 0))
    .map(([key, value]) => `${key}: ${shown(value)}`)
    .join(" · ");
}
