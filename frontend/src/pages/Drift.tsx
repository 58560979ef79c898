import { Link, useParams } from "react-router";
import { useApiQuery } from "../api/hooks";
import { Card, Empty, ErrorBox, Loading, NotFoundPage, StatusBadge, TimeAgo, usePageTitle } from "../components/ui";
import { originLabel } from "../format";
import { DriftOverviewDocument, StackDriftDocument, type DriftStatus } from "../graphql/generated";
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

function Addresses({ drifted }: { drifted: { address: string; action: string }[] }) {
  if (drifted.length === 0) return <span className="muted">—</span>;
  return (
    <ul className="drifted-list">
      {drifted.map((r) => (
        <li key={r.address}>
          <span className="mono wrap">{r.address}</span> <span className="muted small">({r.action})</span>
        </li>
      ))}
    </ul>
  );
}

/** The fleet view: every stack's drift (in sync, drifted, error, not checked) and since when. */
export function DriftPage() {
  const { org = "" } = useParams();
  const { data, error, loading } = useApiQuery(DriftOverviewDocument, { org });
  usePageTitle("Drift");
  if (!data && loading) return <Loading what="the drift overview" />;
  if (error && !data) return <ErrorBox error={error} />;
  const lines = data?.organization?.drift ?? [];
  const counts = (status: DriftStatus) => lines.filter((l) => l.status === status).length;
  return (
    <div className="page drift-page">
      <div className="page-head">
        <div>
          <h1>Drift</h1>
          <p className="muted">The outcome of each stack's latest drift check. Schedule checks with the <code>drift_schedule</code> setting.</p>
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
                  <th scope="col">Drifted resources</th>
                </tr>
              </thead>
              <tbody>
                {lines.map((line) => (
                  <tr key={line.stackSlug} data-stack={line.stackSlug}>
                    <td data-label="Stack">
                      <Link to={`/orgs/${org}/stacks/${line.stackSlug}/drift`}>{line.stackName || line.stackSlug}</Link>
                    </td>
                    <td data-label="Drift">
                      <DriftBadge status={line.status} />
                    </td>
                    <td data-label="Since" className="small nowrap">
                      {line.since ? <TimeAgo iso={line.since} /> : <span className="muted">—</span>}
                    </td>
                    <td data-label="Last check" className="small">
                      {line.lastRun ? <Link to={`/orgs/${org}/runs/${line.lastRun.id}`}>#{line.lastRun.number}</Link> : <span className="muted">never</span>}
                    </td>
                    <td data-label="Drifted resources">
                      <Addresses drifted={line.drifted} />
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

/** A stack's Drift tab: its schedule and every drift check, newest first, with what drifted. */
export function StackDriftPage() {
  const { org = "", slug = "" } = useParams();
  const { data, error, loading } = useApiQuery(StackDriftDocument, { org, slug });
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
