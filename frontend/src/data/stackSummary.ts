import type { StackTreeItemFragment } from "../graphql/generated";

export type Summary = StackTreeItemFragment["summary"];

/** What the stacks list filters stacks by: where they stand, not their newest run. */
export const STACK_STATUSES = [
  { key: "applied", label: "Applied" },
  { key: "failed", label: "Last apply failed" },
  { key: "never", label: "Never applied" },
  { key: "awaiting", label: "Awaiting approval" },
  { key: "running", label: "In progress" },
  { key: "drifted", label: "Drifted" },
] as const;
export type StackStatusKey = (typeof STACK_STATUSES)[number]["key"];

/** The outcome of the stack's last apply, in words. */
export function applyState(summary: Summary): { text: string; tone: string } {
  const last = summary.lastApply;
  if (!last) return { text: "never applied", tone: "muted" };
  if (last.status === "APPLIED") return last.type === "DESTROY" ? { text: "destroyed", tone: "muted" } : { text: "applied", tone: "success" };
  return { text: last.type === "DESTROY" ? "destroy failed" : "apply failed", tone: "danger" };
}

/** "applied · 1 awaiting approval · drifted": the last apply, then what awaits people, then drift. */
export function summaryParts(summary: Summary): { text: string; tone: string }[] {
  const parts = [applyState(summary)];
  if (summary.awaitingApproval) parts.push({ text: `${summary.awaitingApproval} awaiting approval`, tone: "attention" });
  if (summary.active) parts.push({ text: `${summary.active} in progress`, tone: "running" });
  if (summary.drift === "DRIFTED") parts.push({ text: "drifted", tone: "warning" });
  if (summary.drift === "ERROR") parts.push({ text: "drift check failed", tone: "danger" });
  return parts;
}

export function hasStatus(summary: Summary, key: StackStatusKey): boolean {
  switch (key) {
    case "applied":
      return summary.lastApply?.status === "APPLIED";
    case "failed":
      return Boolean(summary.lastApply && summary.lastApply.status !== "APPLIED");
    case "never":
      return !summary.lastApply;
    case "awaiting":
      return summary.awaitingApproval > 0;
    case "running":
      return summary.active > 0;
    case "drifted":
      return summary.drift === "DRIFTED";
  }
}
