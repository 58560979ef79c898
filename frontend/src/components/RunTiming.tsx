import { useState } from "react";
import type { RunDetailFragment } from "../graphql/generated";
import { duration } from "../format";

type Step = RunDetailFragment["steps"][number];

// An approval step shorter than this was no wait for a person (approval not required, or skipped).
const NO_WAIT_MS = 1000;

export type Timing = { tookMs: number; planMs: number; waitedMs: number | null; applyMs: number | null };

/**
 * A run's time split at its approval step: the steps before it are the plan, the approval step
 * is the wait for a person, the steps after it the apply. "took" is the run's duration less the
 * wait: what the machine took, not how long people took to decide.
 */
export function timingOf(durationMs: number, steps: Step[]): Timing {
  const at = steps.findIndex((step) => step.name === "approval");
  const sum = (list: Step[]) => list.reduce((total, step) => total + (step.durationMs ?? 0), 0);
  if (at < 0) return { tookMs: durationMs, planMs: sum(steps), waitedMs: null, applyMs: null };
  const waited = steps[at].durationMs ?? 0;
  const after = steps.slice(at + 1);
  return {
    tookMs: Math.max(0, durationMs - waited),
    planMs: sum(steps.slice(0, at)),
    waitedMs: waited >= NO_WAIT_MS ? waited : null,
    applyMs: after.some((step) => step.durationMs !== null) ? sum(after) : null,
  };
}

/** "took 7.4 s · plan 0.9 s, waited 1 min 49 s, apply 6.5 s". */
export function RunTiming({ run }: { run: Pick<RunDetailFragment, "durationMs" | "steps"> }) {
  if (run.durationMs === null || run.durationMs === undefined) return null;
  const timing = timingOf(run.durationMs, run.steps);
  const parts = [
    timing.applyMs !== null || timing.waitedMs !== null ? `plan ${duration(timing.planMs)}` : null,
    timing.waitedMs !== null ? `waited ${duration(timing.waitedMs)}` : null,
    timing.applyMs !== null ? `apply ${duration(timing.applyMs)}` : null,
  ].filter(Boolean);
  return (
    <span
      title="From the start of the first phase to the end, less the wait for approval: time in the queue is not counted"
      data-testid="run-took"
    >
      took {duration(timing.tookMs)}
      {parts.length > 0 && <span data-testid="run-phases"> · {parts.join(", ")}</span>}
    </span>
  );
}

/** The commit's first line: cut to one line, and whole after a click. */
export function CommitMessage({ message }: { message: string }) {
  const [open, setOpen] = useState(false);
  return (
    <span className={`commit-msg ${open ? "open" : ""}`} data-testid="commit-message">
      <button
        type="button"
        className="commit-msg-toggle"
        aria-expanded={open}
        title={open ? "Show on one line" : "Show the whole message"}
        onClick={() => setOpen(!open)}
      >
        {message}
      </button>
    </span>
  );
}
