import { createContext, useContext, useEffect, useMemo, useRef, useState, type ReactNode } from "react";
import { Link, useLocation, useParams } from "react-router";
import { useLiveSubscription } from "../api/hooks";
import { ActiveRunsDocument, type RunListItemFragment } from "../graphql/generated";
import { TimeAgo, TypeBadge, StatusBadge } from "./ui";
import { WaitingFor } from "./Waiting";
import type { ApiError } from "../api/client";

type ActiveRuns = {
  runs: RunListItemFragment[];
  loaded: boolean;
  error: ApiError | null;
  /** Changes whenever a run starts, moves or ends: screens read again when it does. */
  version: string;
};

const ActiveRunsContext = createContext<ActiveRuns>({ runs: [], loaded: false, error: null, version: "" });

export function useActiveRuns(): ActiveRuns {
  return useContext(ActiveRunsContext);
}

/** The organization's active runs, live over one subscription shared by every screen. */
export function ActiveRunsProvider({ org, children }: { org: string; children: ReactNode }) {
  const [runs, setRuns] = useState<RunListItemFragment[] | null>(null);
  const { error } = useLiveSubscription(ActiveRunsDocument, { org }, { next: (data) => setRuns(data.activeRuns) });
  const value = useMemo(
    () => ({
      runs: runs ?? [],
      loaded: runs !== null,
      error,
      version: (runs ?? []).map((r) => `${r.id}:${r.status}:${r.queuePosition ?? ""}:${r.blockedBy?.id ?? ""}`).join(","),
    }),
    [runs, error],
  );
  return <ActiveRunsContext.Provider value={value}>{children}</ActiveRunsContext.Provider>;
}

/** Runs awaiting approval first (they wait for a person), then the rest, oldest first. */
export function orderedForAttention(runs: RunListItemFragment[]): RunListItemFragment[] {
  return [...runs.filter((r) => r.awaitingApproval), ...runs.filter((r) => !r.awaitingApproval)];
}

function ActiveRunsList({ headingId, headingLevel = 2 }: { headingId: string; headingLevel?: 2 }) {
  const { org } = useParams();
  const { runs, loaded, error } = useActiveRuns();
  const waiting = runs.filter((r) => r.awaitingApproval).length;
  const Heading = `h${headingLevel}` as const;
  return (
    <>
      <header>
        <Heading id={headingId}>Active runs</Heading>
        <span className="count" data-testid="active-count">
          {runs.length}
        </span>
        {waiting > 0 && (
          <span className="pill attention" data-testid="awaiting-count">
            {waiting} awaiting approval
          </span>
        )}
      </header>
      {error && error.code !== "network" && <div className="alert alert-danger small">{error.message}</div>}
      {error && error.code === "network" && <div className="reconnecting">Reconnecting…</div>}
      {!loaded && !error && <div className="muted small pad">Connecting…</div>}
      {loaded && runs.length === 0 && <div className="muted small pad">No runs in progress. Start one from a stack.</div>}
      <ul>
        {panelEntries(runs).map((entry) =>
          entry.kind === "run" ? (
            <RunEntry key={entry.run.id} org={org ?? ""} run={entry.run} />
          ) : (
            <StackQueue key={`queue-${entry.stack.id}`} org={org ?? ""} stack={entry.stack} runs={entry.runs} />
          ),
        )}
      </ul>
    </>
  );
}

type Entry =
  | { kind: "run"; run: RunListItemFragment }
  | { kind: "queue"; stack: RunListItemFragment["stack"]; runs: RunListItemFragment[] };

/**
 * The panel's entries: runs needing attention first, then the rest; the queued runs of a stack
 * with more than one queued are one entry, where the first of them would stand, which says once
 * what they wait for (not "Waiting for run #12" on each of 18 cards).
 */
export function panelEntries(runs: RunListItemFragment[]): Entry[] {
  const queued = new Map<string, RunListItemFragment[]>();
  for (const run of runs) {
    if (run.status === "QUEUED") queued.set(run.stack.id, [...(queued.get(run.stack.id) ?? []), run]);
  }
  const entries: Entry[] = [];
  const placed = new Set<string>();
  for (const run of orderedForAttention(runs)) {
    const group = run.status === "QUEUED" ? (queued.get(run.stack.id) ?? []) : [];
    if (group.length < 2) entries.push({ kind: "run", run });
    else if (!placed.has(run.stack.id)) {
      placed.add(run.stack.id);
      const inLine = [...group].sort((a, b) => (a.queuePosition ?? a.number) - (b.queuePosition ?? b.number));
      entries.push({ kind: "queue", stack: run.stack, runs: inLine });
    }
  }
  return entries;
}

function RunEntry({ org, run }: { org: string; run: RunListItemFragment }) {
  return (
    <li className={run.awaitingApproval ? "attention" : ""} data-run-id={run.id}>
      <Link to={`/orgs/${org}/runs/${run.id}`} className="active-run">
        <div className="line">
          <strong>{run.stack.name || run.stack.slug}</strong>
          <span className="muted">#{run.number}</span>
          <TypeBadge type={run.type} />
        </div>
        <div className="line">
          <StatusBadge status={run.status} />
          <span className="muted small right">
            <TimeAgo iso={run.createdAt} />
          </span>
        </div>
        {run.awaitingApproval && (
          <div className="line review">
            {run.summary?.text && <span className="small">{run.summary.text}</span>}
            <span className="right">Review →</span>
          </div>
        )}
      </Link>
      {/* Beside the run's link, not inside it: it links to the run it waits for. */}
      <WaitingFor org={org} run={run} compact />
    </li>
  );
}

/** A stack's queued runs, in queue order, with what they all wait for said once. */
function StackQueue({ org, stack, runs }: { org: string; stack: RunListItemFragment["stack"]; runs: RunListItemFragment[] }) {
  const first = runs[0];
  return (
    <li className="stack-queue" data-testid="stack-queue" data-stack={stack.slug}>
      <div className="line stack-queue-head">
        <strong>{stack.name || stack.slug}</strong>
        <span className="muted small" data-testid="stack-queue-count">
          {runs.length} queued
        </span>
      </div>
      {/* What the first in line waits for is what they all wait for: the stack's lock. */}
      <WaitingFor org={org} run={{ status: first.status, blockedBy: first.blockedBy, waitingFor: first.waitingFor }} compact />
      <ol className="stack-queue-runs" aria-label={`Queued runs of ${stack.name || stack.slug}, in order`}>
        {runs.map((run) => (
          <li key={run.id} data-run-id={run.id}>
            <Link to={`/orgs/${org}/runs/${run.id}`}>
              #{run.number} <span className="small">{run.type.toLowerCase()}</span>
            </Link>
            <span className="muted small">
              {run.queuePosition ? (run.queuePosition === 1 ? "next" : `number ${run.queuePosition}`) : "queued"} ·{" "}
              <TimeAgo iso={run.createdAt} />
            </span>
          </li>
        ))}
      </ol>
    </li>
  );
}

/** The panel beside the page on wide screens. */
export function ActiveRunsPanel() {
  return (
    <aside className="active-panel" aria-labelledby="active-runs-title" data-testid="active-runs">
      <ActiveRunsList headingId="active-runs-title" />
    </aside>
  );
}

/** On narrow screens: a header button with the counts, opening the same list in a drawer. */
export function ActiveRunsDrawerButton() {
  const { runs } = useActiveRuns();
  const waiting = runs.filter((r) => r.awaitingApproval).length;
  const dialog = useRef<HTMLDialogElement>(null);
  const [open, setOpen] = useState(false);
  const location = useLocation();

  // Following a link in the drawer closes it.
  useEffect(() => {
    dialog.current?.close();
  }, [location.pathname]);

  const label = `Active runs: ${runs.length}${waiting ? `, ${waiting} awaiting approval` : ""}`;
  return (
    <>
      <button
        type="button"
        className={`runs-button ${waiting ? "attention" : ""}`}
        aria-haspopup="dialog"
        aria-expanded={open}
        title={label}
        data-testid="active-runs-button"
        onClick={() => {
          setOpen(true);
          dialog.current?.showModal();
        }}
      >
        <span className="sr-only">Active runs: </span>
        <span className="runs-count">{runs.length}</span>
        <span>{runs.length === 1 ? "run" : "runs"}</span>
        {waiting > 0 && <span className="runs-waiting">· {waiting} to approve</span>}
      </button>
      <dialog
        ref={dialog}
        className="drawer"
        aria-labelledby="active-runs-drawer-title"
        onClose={() => setOpen(false)}
        onClick={(e) => {
          // A click on the backdrop (the dialog element itself, outside its panel) closes it.
          if (e.target === dialog.current) dialog.current.close();
        }}
      >
        {open && (
          <div className="drawer-panel active-panel" data-testid="active-runs-drawer">
            <button type="button" className="btn small drawer-close" onClick={() => dialog.current?.close()}>
              Close
            </button>
            <ActiveRunsList headingId="active-runs-drawer-title" />
          </div>
        )}
      </dialog>
    </>
  );
}
