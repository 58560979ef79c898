import type { ResourceState, RunStatus, RunType, StepStatus } from "./graphql/generated";

export const STATUS_LABEL: Record<RunStatus, string> = {
  QUEUED: "queued",
  PLANNING: "planning",
  NO_CHANGES: "no changes",
  PLANNED: "planned",
  AWAITING_APPROVAL: "awaiting approval",
  APPLY_QUEUED: "apply queued",
  APPLYING: "applying",
  APPLIED: "applied",
  DISCARDED: "discarded",
  DRIFTED: "drifted",
  FAILED: "failed",
  CANCELED: "canceled",
};

/** The colour family of a status: what a glance at a list should tell. */
export function statusTone(status: RunStatus | StepStatus | ResourceState): string {
  switch (status) {
    case "AWAITING_APPROVAL":
      return "attention";
    case "PLANNING":
    case "APPLYING":
    case "RUNNING":
      return "running";
    case "QUEUED":
    case "APPLY_QUEUED":
    case "PENDING":
      return "waiting";
    case "APPLIED":
    case "PLANNED":
    case "NO_CHANGES":
    case "DONE":
      return "success";
    case "FAILED":
      return "danger";
    case "DRIFTED":
      return "warning";
    default:
      return "muted";
  }
}

export function typeLabel(type: RunType): string {
  return type.toLowerCase();
}

export function resourceStateLabel(state: ResourceState): string {
  return state === "NOT_APPLIED" ? "not applied" : state.toLowerCase();
}

export function shortSha(sha: string): string {
  return sha.slice(0, 7);
}

export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "";
  if (ms < 1000) return `${ms} ms`;
  const seconds = ms / 1000;
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  const minutes = Math.floor(seconds / 60);
  const rest = Math.round(seconds % 60);
  if (minutes < 60) return `${minutes} min ${rest} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

export function ago(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return "";
  const seconds = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (seconds < 5) return "just now";
  if (seconds < 60) return `${seconds} s ago`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours} h ago`;
  return new Date(iso).toLocaleDateString();
}

export function dateTime(iso: string | null | undefined): string {
  return iso ? new Date(iso).toLocaleString() : "";
}

/** "folder:prod/eu" → "folder prod/eu"; what a setting's or variable's origin reads as. */
export function originLabel(origin: string): string {
  if (origin.startsWith("folder:")) return `folder ${origin.slice("folder:".length)}`;
  return origin;
}

/** An origin in a sentence: "required by the organization", "by folder prod/eu". */
export function originPhrase(origin: string): string {
  if (origin === "default" || origin === "organization") return `the ${origin}`;
  if (origin === "stack") return "this stack";
  return originLabel(origin);
}

export function plural(count: number, one: string, many = `${one}s`): string {
  return `${count.toLocaleString()} ${count === 1 ? one : many}`;
}
