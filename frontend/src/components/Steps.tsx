import { useState } from "react";
import type { RunDetailFragment } from "../graphql/generated";
import { dateTime, duration } from "../format";
import { LogViewer } from "../log/LogViewer";
import { StepDot, StepStatusText, useNow } from "./ui";

type Step = RunDetailFragment["steps"][number];

export function stepDuration(step: Step, now: number): string {
  // A skipped step (approval not required) took no time worth a number: "approval 0 ms" says nothing.
  if (step.status === "SKIPPED") return "";
  if (step.name === "approval" && step.durationMs !== null && step.durationMs < 1000) return "";
  if (step.durationMs !== null) return duration(step.durationMs);
  if (step.status === "RUNNING" && step.startedAt) return duration(Math.max(0, now - Date.parse(step.startedAt)));
  return "";
}

/** The steps in a row, for the run's header. */
export function StepStrip({ steps, onPick }: { steps: Step[]; onPick: (name: string) => void }) {
  const running = steps.some((s) => s.status === "RUNNING");
  const now = useNow(1000, running);
  return (
    <ol className="step-strip" aria-label="Steps">
      {steps.map((step) => (
        <li key={step.name} className={`st-${step.status.toLowerCase()}`} data-step={step.name} data-step-status={step.status}>
          <button onClick={() => onPick(step.name)} title={`${step.name}: ${step.status.toLowerCase()}`}>
            <StepDot status={step.status} />
            <span className="name">{step.name}</span>
            <span className="dur">{stepDuration(step, now)}</span>
          </button>
        </li>
      ))}
    </ol>
  );
}

/** The timeline, each step with its status, times and its own log (live while it runs). */
export function StepTimeline({ org, run, openStep }: { org: string; run: RunDetailFragment; openStep: string | null }) {
  const running = run.steps.some((s) => s.status === "RUNNING");
  const now = useNow(1000, running);
  const current = run.steps.find((s) => s.status === "RUNNING" || s.status === "FAILED")?.name ?? null;
  const [open, setOpen] = useState<string | null>(openStep ?? current);
  if (run.steps.length === 0) {
    return <div className="muted pad">No step has started yet{run.queuePosition ? `: the run is number ${run.queuePosition} in the stack's queue` : ""}.</div>;
  }
  return (
    <ol className="timeline" data-testid="timeline">
      {run.steps.map((step) => {
        const expanded = open === step.name;
        return (
          <li key={step.name} className={`tl-step st-${step.status.toLowerCase()}`} data-step={step.name} data-step-status={step.status}>
            <button className="tl-head" onClick={() => setOpen(expanded ? null : step.name)} aria-expanded={expanded}>
              <span className="tl-name">{step.name}</span>
              <StepStatusText status={step.status} />
              <span className="spacer" />
              <span className="small muted" title={step.startedAt ? `started ${dateTime(step.startedAt)}` : undefined}>
                {stepDuration(step, now)}
              </span>
              <span className="small muted">{expanded ? "▾" : "▸"}</span>
            </button>
            {expanded && (
              <div className="tl-log">
                {step.name === "approval" ? (
                  <div className="muted small pad">
                    {step.status === "RUNNING"
                      ? "Waiting for someone to approve or discard the plan."
                      : step.status === "SKIPPED"
                        ? "Approval was not required for this run."
                        : run.approval.approvedBy
                          ? `Approved by ${run.approval.approvedBy} ${dateTime(run.approval.approvedAt)}.`
                          : "Ended without approval."}
                  </div>
                ) : (
                  <LogViewer
                    org={org}
                    runId={run.id}
                    steps={[step]}
                    single
                    downloadName={`${run.stack.slug}-run-${run.number}-${step.name}.log`}
                    runFinished={run.finished}
                    height="short"
                    waiting={step.status === "PENDING" ? "This step has not started." : "No output yet."}
                  />
                )}
              </div>
            )}
          </li>
        );
      })}
    </ol>
  );
}
