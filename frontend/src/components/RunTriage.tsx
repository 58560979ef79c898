// A failed run's way forward: the failed resources as links to their changes (filtered to the
// failures), and Retry — a new run of the same type at the same commit.
import { Address } from "./Address";
import { Link, useNavigate } from "react-router";
import { useAction, useMutate } from "../api/hooks";
import { StartRunDocument, type RunDetailFragment } from "../graphql/generated";
import { shortSha } from "../format";
import { changeAnchor } from "./ChangeOutcome";
import { ErrorBox } from "./ui";

// The banner names a few; the state filter finds them all.
const SHOWN_FAILED = 5;

export function RunTriage({ org, run }: { org: string; run: RunDetailFragment }) {
  return (
    <>
      {run.failedResources.count > 0 && <FailedResources org={org} runId={run.id} failed={run.failedResources} />}
      {run.status === "FAILED" && run.stack.viewerCan.startRun && <RetryRun org={org} run={run} />}
    </>
  );
}

// The apply's failed resources, apart from the run's own error: each one's error is on its change.
function FailedResources({ org, runId, failed }: { org: string; runId: string; failed: { count: number; addresses: string[] } }) {
  const shown = failed.addresses.slice(0, SHOWN_FAILED);
  const more = failed.count - shown.length;
  const changes = `/orgs/${org}/runs/${runId}?state=failed`;
  return (
    <div className="alert alert-danger failed-resources" role="alert" data-testid="failed-resources">
      <strong>{failed.count === 1 ? "1 resource failed" : `${failed.count} resources failed`}</strong>
      :{" "}
      {shown.map((address, i) => (
        <span key={address}>
          {i > 0 && ", "}
          <Link to={`${changes}#${encodeURIComponent(changeAnchor(address))}`} className="mono">
            <Address address={address} />
          </Link>
        </span>
      ))}
      {more > 0 && (
        <>
          {" "}
          and <Link to={changes}>{more} more</Link>
        </>
      )}
      . Each one's error is with its change below.
    </div>
  );
}

/** A new run of the same type at the commit this one planned (the branch's tip when it never got one). */
function RetryRun({ org, run }: { org: string; run: RunDetailFragment }) {
  const mutate = useMutate();
  const navigate = useNavigate();
  const action = useAction();
  // A drift run always checks the last applied commit: it is retried as it started.
  const commit = run.type === "DRIFT" ? null : (run.commit?.sha ?? null);

  const retry = () =>
    action.run(async () => {
      const { startRun } = await mutate(StartRunDocument, { org, stack: run.stack.slug, type: run.type, commit });
      if (startRun.__typename !== "Run") return startRun.message;
      navigate(`/orgs/${org}/runs/${startRun.id}`);
    });

  return (
    <div className="retry-bar" data-testid="retry">
      <button type="button" className="btn primary" onClick={() => void retry()} disabled={action.busy}>
        {action.busy ? "Starting…" : "Retry"}
      </button>
      <span className="small muted">
        A new {run.type.toLowerCase()} run {commit ? <>at the same commit, <span className="mono">{shortSha(commit)}</span></> : "at the branch's tip"}.
      </span>
      <ErrorBox error={action.error} title="The run was not started." />
    </div>
  );
}
