import { useEffect, useState, type ReactNode } from "react";
import type { ApiError } from "../api/client";
import type { ResourceState, RunStatus, RunType, StepStatus } from "../graphql/generated";
import { ago, dateTime, resourceStateLabel, STATUS_LABEL, statusTone, typeLabel } from "../format";

export function StatusBadge({ status }: { status: RunStatus }) {
  return (
    <span className={`badge tone-${statusTone(status)}`} data-status={status}>
      <span className="dot" />
      {STATUS_LABEL[status]}
    </span>
  );
}

export function TypeBadge({ type }: { type: RunType }) {
  return <span className={`type type-${type.toLowerCase()}`}>{typeLabel(type)}</span>;
}

export function StepDot({ status }: { status: StepStatus }) {
  return <span className={`step-dot tone-${statusTone(status)}`} title={status.toLowerCase()} />;
}

export function ResourceStateBadge({ state }: { state: ResourceState }) {
  return (
    <span className={`badge small tone-${state === "NOT_APPLIED" ? "warning" : statusTone(state)}`} data-state={state}>
      <span className="dot" />
      {resourceStateLabel(state)}
    </span>
  );
}

/** "3 min ago", kept fresh, with the exact time on hover. */
export function TimeAgo({ iso }: { iso: string | null | undefined }) {
  const now = useNow(15_000);
  if (!iso) return null;
  return (
    <time dateTime={iso} title={dateTime(iso)}>
      {ago(iso, now)}
    </time>
  );
}

export function useNow(every: number, enabled = true): number {
  const [now, setNow] = useState(Date.now);
  useEffect(() => {
    if (!enabled) return;
    setNow(Date.now()); // not a stale "now" from before it was enabled
    const timer = window.setInterval(() => setNow(Date.now()), every);
    return () => window.clearInterval(timer);
  }, [every, enabled]);
  return now;
}

export function ErrorBox({ error, title }: { error: ApiError | string | null | undefined; title?: string }) {
  if (!error) return null;
  return (
    <div className="alert alert-danger" role="alert">
      {title && <strong>{title} </strong>}
      {typeof error === "string" ? error : error.message}
    </div>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <div className="loading" role="status">
      <span className="spinner" /> Loading {what}…
    </div>
  );
}

export function Empty({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="empty">
      <strong>{title}</strong>
      {children && <div>{children}</div>}
    </div>
  );
}

export function Card({ title, actions, children, className }: { title?: ReactNode; actions?: ReactNode; children: ReactNode; className?: string }) {
  return (
    <section className={`card ${className ?? ""}`}>
      {(title || actions) && (
        <header className="card-head">
          {title && <h2>{title}</h2>}
          {actions && <div className="card-actions">{actions}</div>}
        </header>
      )}
      {children}
    </section>
  );
}
