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
        {orderedForAttention(runs).map((run) => (
          <li key={run.id} className={run.awaitingApproval ? "attention" : ""} data-run-id={run.id}>
            <Link to={`/orgs/${org}/runs/${run.id}`} className="active-run">
              <div className="line">
                <strong>{run.stack.slug}</strong>
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
            <WaitingFor org={org ?? ""} run={run} compact />
          </li>
        ))}
      </ul>
    </>
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
