import { useEffect, useState, type ReactNode } from "react";
import { Link, useParams } from "react-router";
import { useAuth } from "../auth";
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

const STEP_SYMBOL: Record<StepStatus, string> = { PENDING: "○", RUNNING: "●", DONE: "✓", FAILED: "✕", SKIPPED: "–" };

/** A step's status as a symbol in its colour, with the word for screen readers (never colour alone). */
export function StepDot({ status }: { status: StepStatus }) {
  return (
    <span className={`step-dot tone-${statusTone(status)}`} title={status.toLowerCase()}>
      <span aria-hidden="true">{STEP_SYMBOL[status]}</span>
      <span className="sr-only">{status.toLowerCase()}</span>
    </span>
  );
}

/** A step's status in words, in its colour. */
export function StepStatusText({ status }: { status: StepStatus }) {
  return (
    <span className={`step-status tone-text-${statusTone(status)}`} data-step-status-text={status}>
      <span aria-hidden="true">{STEP_SYMBOL[status]} </span>
      {status.toLowerCase()}
    </span>
  );
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

/** The browser tab's title: the page's own words first, "Firstlume" last. */
export function usePageTitle(...parts: (string | null | undefined | false)[]): void {
  const title = [...parts.filter(Boolean), "Firstlume"].join(" · ");
  useEffect(() => {
    document.title = title;
  }, [title]);
}

/** An organization's page: its title names the organization by its name, never its slug. */
export function useOrgPageTitle(page: string): void {
  const { org = "" } = useParams();
  const { viewer } = useAuth();
  usePageTitle(page, viewer?.organizations.find((o) => o.slug === org)?.name || org);
}

/** Nothing at this address, in words, with the way back. */
export function NotFoundPage({ title, back = "/", backLabel = "Go to your stacks" }: { title: string; back?: string; backLabel?: string }) {
  usePageTitle("Not found");
  return (
    <div className="page not-found" data-testid="not-found">
      <div className="empty">
        <h1>{title}</h1>
        <Link to={back}>{backLabel}</Link>
      </div>
    </div>
  );
}
