import { useMemo, useRef, useState, type FormEvent } from "react";
import { Link, useParams } from "react-router";
import { useAction, useApiQuery, useMutate } from "../api/hooks";
import { useActiveRuns } from "../components/ActiveRuns";
import { Card, Empty, ErrorBox, Loading, NotFoundPage, StatusBadge, TimeAgo, useOrgPageTitle, usePageTitle } from "../components/ui";
import { originLabel } from "../format";
import {
  DriftOverviewDocument,
  StackDriftDocument,
  StartRunDocument,
  UpdateSettingsDocument,
  type DriftStatus,
  type RunType,
} from "../graphql/generated";
import { StackHeader } from "./Stack";

const DRIFT_LABEL: Record<DriftStatus, string> = { IN_SYNC: "in sync", DRIFTED: "drifted", ERROR: "error", UNKNOWN: "not checked" };
const DRIFT_TONE: Record<DriftStatus, string> = { IN_SYNC: "success", DRIFTED: "warning", ERROR: "danger", UNKNOWN: "muted" };

export function DriftBadge({ status }: { status: DriftStatus }) {
  return (
    <span className={`badge tone-${DRIFT_TONE[status]}`} data-drift={status}>
      <span className="dot" aria-hidden="true" />
      {DRIFT_LABEL[status]}
    </span>
  );
}

function Addresses({ drifted, count }: { drifted: { address: string; action: string; finding: string }[]; count?: number }) {
  if (drifted.length === 0) return <span className="muted">—</span>;
  return (
    <ul className="drifted-list">
      {drifted.map((r) => (
        <li key={r.address} data-finding={r.action}>
          <span className="mono wrap">{r.address}</span> <span className="muted small">{r.finding}</span>
        </li>
      ))}
      {count !== undefined && count > drifted.length && <li className="muted small">and {count - drifted.length} more</li>}
    </ul>
  );
}

/**
 * The query's data, or the last data it had for the same `key` while it is read again: saving a
 * setting invalidates the settings in the cache (api/cache.ts), and a page that went back to
 * "Loading" then would unmount what the viewer was doing (the error being read, a note).
 */
function useLastData<T>(data: T | undefined, key: string): T | undefined {
  const last = useRef<{ key: string; data: T | undefined }>({ key, data });
  if (data !== undefined || last.current.key !== key) last.current = { key, data };
  return last.current.data;
}

const mayRun = (role: string | null | undefined) => role === "operator" || role === "admin";

/** "Check now" (a drift run) and, for a drifted stack, "Reconcile" (an apply of its code). */
function DriftActions({ org, slug, name, role, drifted }: { org: string; slug: string; name: string; role: string | null | undefined; drifted: boolean }) {
  const mutate = useMutate();
  const { busy, error, run } = useAction();
  const [started, setStarted] = useState<{ id: string; number: number; type: RunType } | null>(null);
  if (!mayRun(role)) return <span className="muted small">Operators start checks.</span>;

  const start = (type: RunType) =>
    run(async () => {
      const { startRun } = await mutate(StartRunDocument, { org, stack: slug, type });
      if (startRun.__typename !== "Run") return startRun.message;
      setStarted({ id: startRun.id, number: startRun.number, type });
    });

  return (
    <div className="drift-actions">
      <button className="btn small" disabled={busy} onClick={() => void start("DRIFT")} aria-label={`Check now: ${name}`}>
        Check now
      </button>
      {drifted && (
        <button className="btn small primary" disabled={busy} onClick={() => void start("APPLY")} aria-label={`Reconcile ${name}`} title="Start an apply of the stack's code: its plan shows what it puts back.">
          Reconcile
        </button>
      )}
      {started && (
        <span className="small" role="status" data-testid="drift-started">
          {started.type === "DRIFT" ? "Drift check" : "Apply"} <Link to={`/orgs/${org}/runs/${started.id}`}>#{started.number}</Link> started.
        </span>
      )}
      <ErrorBox error={error} />
    </div>
  );
}

/**
 * The `drift_schedule` setting of the organization or a stack: a cron expression in UTC, checked
 * by the server as the API checks it (its refusal is shown as it says it). Empty: inherit (a
 * stack) or no schedule (the organization). Admins change it.
 */
function DriftScheduleEditor({
  org,
  stack,
  explicit,
  effective,
  canEdit,
}: {
  org: string;
  stack?: string;
  explicit: string | null | undefined;
  effective: { value?: string | null; origin: string };
  canEdit: boolean;
}) {
  const mutate = useMutate();
  const { busy, error, run } = useAction();
  const [draft, setDraft] = useState(explicit ?? "");
  const [saved, setSaved] = useState<string | null>(null);
  const level = stack ? "this stack" : "the organization";
  const inherit = stack ? "Inherit" : "No schedule";

  const save = (value: string | null) =>
    run(async () => {
      setSaved(null);
      const { updateSettings } = await mutate(UpdateSettingsDocument, { org, stack: stack ?? null, folder: null, input: { driftSchedule: value } });
      if (updateSettings.__typename !== "Settings") return updateSettings.message;
      setDraft(value ?? "");
      setSaved(value ? `Saved: checks run on ${value} (UTC).` : stack ? "Saved: the schedule is inherited." : "Saved: no schedule.");
    });

  function submit(event: FormEvent) {
    event.preventDefault();
    void save(draft.trim() || null);
  }

  const id = `drift-schedule-${stack ?? "org"}`;
  return (
    <div className="drift-schedule-editor" data-setting="drift_schedule">
      <p className="effective" data-testid="effective-schedule">
        {effective.value ? (
          <>
            Effective on {level}: <code>{effective.value}</code> (UTC), {effective.origin === (stack ? "stack" : "organization") ? `set on ${level}` : `inherited from ${originLabel(effective.origin)}`}.
          </>
        ) : (
          <span className="muted">No drift schedule on {level}: checks run when someone starts one.</span>
        )}
      </p>
      {canEdit ? (
        <form className="form-row" onSubmit={submit}>
          <label className="grow" htmlFor={id}>
            Drift schedule <span className="muted">(cron, UTC)</span>
            <input id={id} value={draft} onChange={(e) => setDraft(e.target.value)} placeholder="0 6 * * *" className="mono" spellCheck={false} />
            <span className="hint">Five fields: minute hour day month weekday. Empty: {stack ? "inherit from the folder or organization" : "no schedule"}.</span>
          </label>
          <button className="btn primary" type="submit" disabled={busy}>
            Save schedule
          </button>
          {explicit && (
            <button className="btn" type="button" disabled={busy} onClick={() => void save(null)}>
              {inherit}
            </button>
          )}
        </form>
      ) : (
        <p className="muted small">Admins set the drift schedule.</p>
      )}
      {saved && (
        <p className="small tone-text-success" role="status" data-testid="schedule-saved">
          {saved}
        </p>
      )}
      <ErrorBox error={error} title="The schedule was not saved." />
    </div>
  );
}

const WORST_FIRST: Record<DriftStatus, number> = { DRIFTED: 0, ERROR: 1, UNKNOWN: 2, IN_SYNC: 3 };

/** The fleet view, worst first: every stack's drift (in sync, drifted, error, not checked), since when, its schedule. */
export function DriftPage() {
  const { org = "" } = useParams();
  const { version } = useActiveRuns();
  // Live as the stacks list is: a drift run that starts or ends changes the active runs.
  const query = useApiQuery(DriftOverviewDocument, { org }, { refreshKey: version });
  const { error, loading } = query;
  const data = useLastData(query.data, org);
  useOrgPageTitle("Drift");
  const lines = useMemo(
    () =>
      [...(data?.organization?.drift ?? [])].sort(
        (a, b) => b.driftedCount - a.driftedCount || WORST_FIRST[a.status] - WORST_FIRST[b.status] || (a.stackName || a.stackSlug).localeCompare(b.stackName || b.stackSlug),
      ),
    [data],
  );
  if (!data && loading) return <Loading what="the drift overview" />;
  if (error && !data) return <ErrorBox error={error} />;
  const organization = data?.organization;
  const counts = (status: DriftStatus) => lines.filter((l) => l.status === status).length;
  return (
    <div className="page drift-page">
      <div className="page-head">
        <div>
          <h1>Drift</h1>
          <p className="muted">The outcome of each stack's latest drift check, the most drifted first.</p>
        </div>
      </div>
      <ErrorBox error={error} />
      <dl className="facts">
        {(["DRIFTED", "ERROR", "IN_SYNC", "UNKNOWN"] as DriftStatus[]).map((status) => (
          <div key={status}>
            <dt>{DRIFT_LABEL[status]}</dt>
            <dd data-testid={`drift-count-${status}`}>{counts(status)}</dd>
          </div>
        ))}
      </dl>
      {organization && (
        <Card title="Organization schedule">
          <DriftScheduleEditor
            org={org}
            explicit={organization.settings.explicit.driftSchedule}
            effective={organization.settings.effective.driftSchedule}
            canEdit={organization.viewerRole === "admin"}
          />
        </Card>
      )}
      <Card>
        {lines.length === 0 ? (
          <Empty title="No stacks yet." />
        ) : (
          <div className="table-box">
            <table className="table responsive drift-table">
              <thead>
                <tr>
                  <th scope="col">Stack</th>
                  <th scope="col">Drift</th>
                  <th scope="col">Since</th>
                  <th scope="col">Last check</th>
                  <th scope="col">Schedule</th>
                  <th scope="col">Drifted resources</th>
                  <th scope="col">Actions</th>
                </tr>
              </thead>
              <tbody>
                {lines.map((line) => {
                  const schedule = line.stack.settings.effective.driftSchedule;
                  return (
                    <tr key={line.stackSlug} data-stack={line.stackSlug} data-drifted-count={line.driftedCount}>
                      <td data-label="Stack">
                        <Link to={`/orgs/${org}/stacks/${line.stackSlug}/drift`}>{line.stackName || line.stackSlug}</Link>
                      </td>
                      <td data-label="Drift">
                        <DriftBadge status={line.status} />
                        {line.driftedCount > 0 && <span className="small muted"> {line.driftedCount} {line.driftedCount === 1 ? "resource" : "resources"}</span>}
                      </td>
                      <td data-label="Since" className="small nowrap">
                        {line.since ? <TimeAgo iso={line.since} /> : <span className="muted">—</span>}
                      </td>
                      <td data-label="Last check" className="small">
                        {line.lastRun ? <Link to={`/orgs/${org}/runs/${line.lastRun.id}`}>#{line.lastRun.number}</Link> : <span className="muted">never</span>}
                      </td>
                      <td data-label="Schedule" className="small" data-testid="schedule">
                        {schedule.value ? <code title={`set on ${originLabel(schedule.origin)}`}>{schedule.value}</code> : <span className="muted">none</span>}
                      </td>
                      <td data-label="Drifted resources">
                        <Addresses drifted={line.drifted} count={line.driftedCount} />
                      </td>
                      <td data-label="Actions">
                        <DriftActions org={org} slug={line.stackSlug} name={line.stackName || line.stackSlug} role={line.stack.viewerRole} drifted={line.status === "DRIFTED"} />
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
        )}
      </Card>
    </div>
  );
}

/** A stack's Drift tab: its schedule and every drift check, newest first, with what drifted. */
export function StackDriftPage() {
  const { org = "", slug = "" } = useParams();
  const { version } = useActiveRuns();
  const query = useApiQuery(StackDriftDocument, { org, slug }, { refreshKey: version });
  const { error, loading } = query;
  const data = useLastData(query.data, `${org}/${slug}`);
  const stack = data?.organization?.stack;
  usePageTitle("Drift", stack ? stack.name || stack.slug : slug, "Stacks");
  if (!data && loading) return <Loading what="the drift history" />;
  if (error && !data) return <ErrorBox error={error} />;
  if (!stack) return <NotFoundPage title={`There is no stack “${slug}” here.`} back={`/orgs/${org}/stacks`} backLabel="All stacks" />;
  const schedule = stack.settings.effective.driftSchedule;
  return (
    <div className="page stack-drift-page">
      <StackHeader org={org} slug={slug} folder={stack.folder?.path} title={stack.name || stack.slug} />
      <ErrorBox error={error} />
      <p data-testid="drift-schedule">
        {schedule.value ? (
          <>
            Checked on the schedule <code>{schedule.value}</code> (UTC), set on {originLabel(schedule.origin)}.
          </>
        ) : (
          <span className="muted">No drift schedule: checks run when someone starts one.</span>
        )}
      </p>
      <DriftActions
        org={org}
        slug={stack.slug}
        name={stack.name || stack.slug}
        role={stack.viewerRole}
        drifted={stack.driftHistory.find((c) => c.status !== "UNKNOWN")?.status === "DRIFTED"}
      />
      <Card title="Schedule">
        <DriftScheduleEditor
          org={org}
          stack={stack.slug}
          explicit={stack.settings.explicit.driftSchedule}
          effective={schedule}
          canEdit={stack.viewerRole === "admin"}
        />
      </Card>
      <Card title="Drift checks">
        {stack.driftHistory.length === 0 ? (
          <Empty title="No drift check yet.">Start a drift check from the Runs tab, or set a drift schedule.</Empty>
        ) : (
          <div className="table-box">
            <table className="table responsive drift-table">
              <thead>
                <tr>
                  <th scope="col">Run</th>
                  <th scope="col">Result</th>
                  <th scope="col">Started by</th>
                  <th scope="col">Finished</th>
                  <th scope="col">Drifted resources</th>
                </tr>
              </thead>
              <tbody>
                {stack.driftHistory.map((check) => (
                  <tr key={check.run.id} data-run={check.run.id}>
                    <td data-label="Run">
                      <Link to={`/orgs/${org}/runs/${check.run.id}`}>#{check.run.number}</Link>
                    </td>
                    <td data-label="Result">{check.status === "UNKNOWN" ? <StatusBadge status={check.run.status} /> : <DriftBadge status={check.status} />}</td>
                    <td data-label="Started by" className="small">{check.run.trigger.kind === "SCHEDULE" ? "schedule" : check.run.trigger.kind === "PUSH" ? "push" : "a person"}</td>
                    <td data-label="Finished" className="small nowrap">
                      {check.run.finishedAt ? <TimeAgo iso={check.run.finishedAt} /> : <span className="muted">—</span>}
                    </td>
                    <td data-label="Drifted resources">
                      <Addresses drifted={check.drifted} />
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
