import { useState } from "react";
import { Link, NavLink, useNavigate, useParams, useSearchParams } from "react-router";
import { useAction, useApiQuery, useMutate } from "../api/hooks";
import { useActiveRuns } from "../components/ActiveRuns";
import { ConfirmChange, Saved } from "../components/Confirm";
import { Card, Empty, ErrorBox, Loading, NotFoundPage, StatusBadge, TimeAgo, TypeBadge, usePageTitle } from "../components/ui";
import { duration, shortSha, STATUS_LABEL } from "../format";
import {
  StackPageDocument,
  StartRunDocument,
  UpdateStackTriggerDocument,
  type RunListItemFragment,
  type RunStatus,
  type RunType,
  type StackTrigger,
  type TriggerKind,
} from "../graphql/generated";

const PAGE = 25;

const RUN_BUTTONS: { type: RunType; label: string; hint: string }[] = [
  { type: "PLAN", label: "Plan", hint: "Plan only: shows the changes, never applies." },
  { type: "APPLY", label: "Apply", hint: "Plan, wait for approval if required, then apply exactly that plan." },
  { type: "DESTROY", label: "Destroy…", hint: "Plan deleting every resource of the stack, then apply after approval." },
  { type: "DRIFT", label: "Drift check", hint: "Compare the real infrastructure with the state; never applies." },
];

export function StackHeader({ org, slug, folder, title, children }: { org: string; slug: string; folder?: string | null; title: string; children?: React.ReactNode }) {
  return (
    <div className="page-head">
      <div>
        <nav className="crumbs">
          <Link to={`/orgs/${org}/stacks`}>Stacks</Link>
          {folder && (
            <>
              <span>/</span>
              <Link to={`/orgs/${org}/folders/${folder}`}>{folder}</Link>
            </>
          )}
        </nav>
        <h1>{title}</h1>
        <nav className="tabs">
          <NavLink end to={`/orgs/${org}/stacks/${slug}`}>
            Runs
          </NavLink>
          <NavLink to={`/orgs/${org}/stacks/${slug}/pull-requests`}>Pull requests</NavLink>
          <NavLink to={`/orgs/${org}/stacks/${slug}/state`}>State</NavLink>
          <NavLink to={`/orgs/${org}/stacks/${slug}/drift`}>Drift</NavLink>
          <NavLink to={`/orgs/${org}/stacks/${slug}/dependencies`}>Dependencies</NavLink>
          <NavLink to={`/orgs/${org}/stacks/${slug}/settings`}>Settings & variables</NavLink>
        </nav>
      </div>
      {children}
    </div>
  );
}

export function StackPage() {
  const { org = "", slug = "" } = useParams();
  const mutate = useMutate();
  const navigate = useNavigate();
  // Read again whenever a run starts, moves or ends: statuses and queue positions change then.
  const { version } = useActiveRuns();
  // The history's filters live in the address (?status=failed&type=apply&trigger=push): a
  // filtered history can be linked to. The server filters and counts; a change starts at page 1.
  const [params, setParams] = useSearchParams();
  const filters = readFilters(params);
  const filterKey = `${filters.status}|${filters.type}|${filters.trigger}`;
  // Pages of older runs, by cursor: the first page (null) is the newest.
  const [paging, setPaging] = useState<{ key: string; cursors: (string | null)[] }>({ key: filterKey, cursors: [null] });
  const cursors = paging.key === filterKey ? paging.cursors : [null];
  const setCursors = (next: (string | null)[]) => setPaging({ key: filterKey, cursors: next });
  const after = cursors[cursors.length - 1];
  const { data, error, loading } = useApiQuery(
    StackPageDocument,
    {
      org,
      slug,
      first: PAGE,
      after,
      status: filters.status ? [filters.status] : null,
      type: filters.type ? [filters.type] : null,
      trigger: filters.trigger ? [filters.trigger] : null,
    },
    { refreshKey: version },
  );
  const filtering = Boolean(filters.status || filters.type || filters.trigger);
  const setFilter = (name: keyof Filters, value: string) => {
    // From the address as it is now, not as this render read it: the router re-renders in a
    // transition, and a second change before that (two filters set in quick succession) would
    // otherwise start from the old address and undo the first.
    const next = new URLSearchParams(window.location.search);
    if (value) next.set(name, value.toLowerCase());
    else next.delete(name);
    setParams(next, { replace: true });
  };
  const [confirmDestroy, setConfirmDestroy] = useState(false);
  const [starting, setStarting] = useState<RunType | null>(null);
  const action = useAction();
  const stack = data?.organization?.stack;
  usePageTitle(stack ? stack.name || stack.slug : slug, "Stacks");

  async function start(type: RunType) {
    setStarting(type);
    await action.run(async () => {
      const { startRun } = await mutate(StartRunDocument, { org, stack: slug, type });
      if (startRun.__typename !== "Run") return startRun.message;
      navigate(`/orgs/${org}/runs/${startRun.id}`);
    });
    setStarting(null);
    setConfirmDestroy(false);
  }

  if (!data && loading) return <Loading what="the stack" />;
  if (error && !data) return <ErrorBox error={error} />;
  if (!stack) return <NotFoundPage title={`There is no stack “${slug}” here.`} back={`/orgs/${org}/stacks`} backLabel="All stacks" />;
  // What the server says the caller may do here (folder grants included) decides what is shown.
  const mayStart = stack.viewerCan.startRun;

  return (
    <div className="page">
      <StackHeader org={org} slug={slug} folder={stack.folder?.path} title={stack.name || stack.slug}>
        {mayStart ? (
          <div className="actions" role="group" aria-label="Start a run">
            {RUN_BUTTONS.map((b) => (
              <button
                key={b.type}
                className={`btn ${b.type === "APPLY" ? "primary" : b.type === "DESTROY" ? "danger-outline" : ""}`}
                title={b.hint}
                disabled={starting !== null}
                onClick={() => (b.type === "DESTROY" ? setConfirmDestroy(true) : void start(b.type))}
              >
                {starting === b.type ? "Starting…" : b.label}
              </button>
            ))}
          </div>
        ) : (
          <p className="muted small" data-testid="cannot-start">
            You are {stack.viewerRole === "admin" || stack.viewerRole === "operator" ? "an" : "a"} {stack.viewerRole ?? "reader"} on this stack: starting runs needs the operator role.
          </p>
        )}
      </StackHeader>
      <dl className="facts">
        <div>
          <dt>Repository</dt>
          <dd className="mono">{stack.repository}</dd>
        </div>
        <div>
          <dt>Branch</dt>
          <dd className="mono">{stack.branch}</dd>
        </div>
        <div>
          <dt>Path</dt>
          <dd className="mono">{stack.path || "."}</dd>
        </div>
        <div>
          <dt>Slug</dt>
          <dd className="mono">{stack.slug}</dd>
        </div>
        <div>
          <dt>
            <label htmlFor="stack-trigger">On a push</label>
          </dt>
          <dd>
            <TriggerPicker org={org} slug={slug} trigger={stack.trigger} branch={stack.branch} may={stack.viewerCan.updateStack} />
          </dd>
        </div>
      </dl>
      {confirmDestroy && (
        <div className="alert alert-danger confirm">
          <div>
            <strong>Start a destroy run?</strong> It plans deleting every resource of this stack. Nothing is deleted until
            the plan is approved.
          </div>
          <div className="actions">
            <button className="btn" onClick={() => setConfirmDestroy(false)}>
              Keep everything
            </button>
            <button className="btn danger" onClick={() => void start("DESTROY")}>
              Plan the destroy
            </button>
          </div>
        </div>
      )}
      <ErrorBox error={action.error} title="The run was not started." />
      <ErrorBox error={error} />
      <Card title={`Runs${stack.runs.totalCount ? ` (${stack.runs.totalCount})` : ""}`}>
        <HistoryFilters filters={filters} onChange={setFilter} matched={filtering ? stack.runs.totalCount : null} />
        {stack.runs.nodes.length === 0 ? (
          filtering ? (
            <Empty title="No run matches these filters.">Clear a filter to see more of the history.</Empty>
          ) : (
            <Empty title="No runs yet.">Start a plan to see what this stack would change.</Empty>
          )
        ) : (
          <RunTable org={org} runs={stack.runs.nodes} />
        )}
        {(cursors.length > 1 || stack.runs.pageInfo.hasNextPage) && (
          <div className="more">
            <button className="btn small" disabled={cursors.length === 1} onClick={() => setCursors(cursors.slice(0, -1))}>
              ← Newer runs
            </button>
            <button
              className="btn small"
              disabled={!stack.runs.pageInfo.hasNextPage}
              onClick={() => setCursors([...cursors, stack.runs.pageInfo.endCursor])}
            >
              Older runs →
            </button>
          </div>
        )}
      </Card>
    </div>
  );
}

const TRIGGERS: { value: StackTrigger; label: string }[] = [
  { value: "MANUAL", label: "Nothing (manual runs only)" },
  { value: "PLAN", label: "Plan" },
  { value: "APPLY", label: "Apply (after approval if required)" },
];

/** What a new commit on the branch that touches the stack starts: picked, then saved with Save
 * after a confirmation that says what a push will do from now on. Only those who may change the
 * stack see the picker; the others read the choice. */
function TriggerPicker({ org, slug, trigger, branch, may }: { org: string; slug: string; trigger: StackTrigger; branch: string; may: boolean }) {
  const mutate = useMutate();
  const action = useAction();
  const [draft, setDraft] = useState<StackTrigger>(trigger);
  const [asking, setAsking] = useState(false);
  const label = (value: StackTrigger) => TRIGGERS.find((t) => t.value === value)?.label ?? value;
  if (!may) return <span data-testid="stack-trigger-text">{label(trigger)}</span>;
  async function save() {
    await action.run(async () => {
      const { updateStack } = await mutate(UpdateStackTriggerDocument, { org, stack: slug, trigger: draft });
      if (updateStack.__typename !== "Stack") return updateStack.message;
    });
    setAsking(false);
  }
  return (
    <>
      <span className="inline-form">
        <select
          id="stack-trigger"
          data-testid="stack-trigger"
          value={draft}
          disabled={action.busy}
          onChange={(e) => {
            action.reset();
            setAsking(false);
            setDraft(e.target.value as StackTrigger);
          }}
          title="Commits that touch the stack's path or its config.yaml watch globs start this run"
        >
          {TRIGGERS.map((t) => (
            <option key={t.value} value={t.value}>
              {t.label}
            </option>
          ))}
        </select>
        {draft !== trigger && !asking && (
          <button type="button" className="btn small primary" onClick={() => setAsking(true)}>
            Save
          </button>
        )}
        <Saved show={action.done && draft === trigger} />
      </span>
      {asking && draft !== trigger && (
        <ConfirmChange
          busy={action.busy}
          onBack={() => setAsking(false)}
          onSave={() => void save()}
          question={
            <>
              <strong>Change what a push starts?</strong> From now on, a commit on <span className="mono">{branch}</span> that touches this stack
              starts: <strong>{label(draft).toLowerCase()}</strong> (was: {label(trigger).toLowerCase()}).
            </>
          }
        />
      )}
      <ErrorBox error={action.error} title="The trigger was not changed." />
    </>
  );
}

/** How long a run took, as the server measures it: from the start of its first phase (time in
 * the queue is not counted) to its end; nothing for a run that never started. */
function took(run: RunListItemFragment): string {
  return run.durationMs === null ? "" : duration(run.durationMs);
}

type Filters = { status: RunStatus | ""; type: RunType | ""; trigger: TriggerKind | "" };

const STATUSES = Object.keys(STATUS_LABEL) as RunStatus[];
const TYPES: RunType[] = ["PLAN", "APPLY", "DESTROY", "DRIFT"];
const TRIGGER_KINDS: { kind: TriggerKind; label: string }[] = [
  { kind: "MANUAL", label: "a person" },
  { kind: "PUSH", label: "a push" },
  { kind: "SCHEDULE", label: "the schedule" },
];

function readFilters(params: URLSearchParams): Filters {
  const pick = <T extends string>(name: string, allowed: readonly T[]): T | "" => {
    const value = (params.get(name) ?? "").toUpperCase() as T;
    return allowed.includes(value) ? value : "";
  };
  return {
    status: pick("status", STATUSES),
    type: pick("type", TYPES),
    trigger: pick(
      "trigger",
      TRIGGER_KINDS.map((t) => t.kind),
    ),
  };
}

/** The history's filters: status, type and what started the run, answered by the server. */
function HistoryFilters({
  filters,
  onChange,
  matched,
}: {
  filters: Filters;
  onChange: (name: keyof Filters, value: string) => void;
  /** How many runs match, while filtering. */
  matched: number | null;
}) {
  return (
    <div className="filters history-filters" role="group" aria-label="Filter the run history">
      <select aria-label="Filter runs by status" value={filters.status} onChange={(e) => onChange("status", e.target.value)}>
        <option value="">Any status</option>
        {STATUSES.map((status) => (
          <option key={status} value={status}>
            {STATUS_LABEL[status]}
          </option>
        ))}
      </select>
      <select aria-label="Filter runs by type" value={filters.type} onChange={(e) => onChange("type", e.target.value)}>
        <option value="">Any type</option>
        {TYPES.map((type) => (
          <option key={type} value={type}>
            {type.toLowerCase()}
          </option>
        ))}
      </select>
      <select aria-label="Filter runs by trigger" value={filters.trigger} onChange={(e) => onChange("trigger", e.target.value)}>
        <option value="">Started by anything</option>
        {TRIGGER_KINDS.map((t) => (
          <option key={t.kind} value={t.kind}>
            Started by {t.label}
          </option>
        ))}
      </select>
      {matched !== null && (
        <span className="small muted" role="status" data-testid="history-matches">
          {matched.toLocaleString()} {matched === 1 ? "run matches" : "runs match"}
        </span>
      )}
    </div>
  );
}

/** The stack's runs: a table on wide screens, one card per run on narrow ones (same markup). */
function RunTable({ org, runs }: { org: string; runs: RunListItemFragment[] }) {
  return (
    <div className="table-box">
    <table className="table runs-table responsive">
      <thead>
        <tr>
          <th scope="col">Run</th>
          <th scope="col">Status</th>
          <th scope="col">Type</th>
          <th scope="col">Commit</th>
          <th scope="col">Changes</th>
          <th scope="col">Started by</th>
          <th scope="col">Created</th>
          <th scope="col">Took</th>
        </tr>
      </thead>
      <tbody>
        {runs.map((run) => (
          <tr key={run.id} data-run-id={run.id} className={run.awaitingApproval ? "attention" : ""}>
            <td data-label="Run" className="run-cell">
              <Link to={`/orgs/${org}/runs/${run.id}`} className="run-link">
                #{run.number}
              </Link>
            </td>
            <td data-label="Status" className="status-cell">
              <StatusBadge status={run.status} />
              {run.queuePosition !== null && (
                <span className="queue-pos" title="Position in this stack's queue">
                  {" "}
                  position {run.queuePosition}
                </span>
              )}
            </td>
            <td data-label="Type" className="type-cell">
              <TypeBadge type={run.type} />
            </td>
            <td data-label="Commit" className="commit-cell">
              {run.commit ? (
                <div className="commit-line">
                  {run.commit.url ? (
                    <a className="mono" href={run.commit.url} target="_blank" rel="noreferrer">
                      {shortSha(run.commit.sha)}
                    </a>
                  ) : (
                    <span className="mono">{shortSha(run.commit.sha)}</span>
                  )}
                  <span className="ellipsis" title={run.commit.message ?? undefined}>
                    {run.commit.message}
                  </span>
                </div>
              ) : (
                <span className="muted">—</span>
              )}
            </td>
            <td data-label="Changes" className="small nowrap">
              {run.summary?.text ?? <span className="muted">—</span>}
            </td>
            <td data-label="Started by" className="small by-cell" title={run.createdBy ?? undefined}>
              {run.createdBy ?? <span className="muted">—</span>}
            </td>
            <td data-label="Created" className="small nowrap">
              <TimeAgo iso={run.createdAt} />
            </td>
            <td data-label="Took" className="small muted nowrap">
              {took(run) || "—"}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
    </div>
  );
}
