import { Link } from "react-router";
import type { BlockerFragment, RunStatus } from "../graphql/generated";
import { STATUS_LABEL } from "../format";

type Queued = {
  status: RunStatus;
  queuePosition?: number | null;
  blockedBy?: BlockerFragment | null;
  /** Set while a person holds the stack's state lock: "waiting for the state lock held by …". */
  waitingFor?: string | null;
};

/**
 * Why a queued run has not started: the run holding its stack's lock (named and linked, with
 * that run's status in words) and its own place in the stack's queue. Both come from the server
 * (`blockedBy`, `queuePosition`); nothing here decides who holds a lock.
 */
export function WaitingFor({ org, run, compact = false }: { org: string; run: Queued; compact?: boolean }) {
  const Tag = compact ? "span" : "p";
  if (run.waitingFor) {
    const text = run.waitingFor;
    return (
      <Tag className={`waiting-for ${compact ? "small" : ""}`} data-testid="waiting-for-state-lock">
        {text.charAt(0).toUpperCase() + text.slice(1)}.
      </Tag>
    );
  }
  if (run.status !== "QUEUED") return null;
  const position = run.queuePosition ?? null;
  const blocker = run.blockedBy ?? null;
  const place =
    position === null ? null : position === 1 ? "next in the stack's queue" : `number ${position} in the stack's queue`;
  return (
    <Tag className={`waiting-for ${compact ? "small" : ""}`} data-testid="waiting-for" data-queue-position={position ?? undefined}>
      {blocker ? (
        <>
          Waiting for{" "}
          <Link to={`/orgs/${org}/runs/${blocker.id}`} data-testid="blocked-by" onClick={(e) => e.stopPropagation()}>
            run #{blocker.number}
          </Link>{" "}
          ({blocker.type.toLowerCase()}, {STATUS_LABEL[blocker.status]}), which holds the stack's lock
        </>
      ) : (
        <>Waiting to start</>
      )}
      {place && <>; {place}</>}.
    </Tag>
  );
}
