// What an apply did to the planned changes, for triage: the outcome in words ("198 done, 2 failed,
// 1 not applied"), a filter by state with the failures first, and the address anchors the
// failure banner links to.
import { useEffect, useRef } from "react";
import { useLocation, useSearchParams } from "react-router";
import type { ResourceState } from "../graphql/generated";
import type { ChangeOutcome } from "../data/changes";
import { resourceStateLabel } from "../format";

// Failures first: they are what a reader of a failed run looks for.
const ORDER: [ResourceState, keyof Omit<ChangeOutcome, "__typename">][] = [
  ["FAILED", "failed"],
  ["NOT_APPLIED", "notApplied"],
  ["APPLYING", "applying"],
  ["DONE", "done"],
  ["PENDING", "pending"],
];
const STATES = new Set<string>(ORDER.map(([state]) => state));

function count(outcome: ChangeOutcome, state: ResourceState): number {
  return outcome[ORDER.find(([s]) => s === state)![1]];
}

/** True once an apply has reached any change (before that, every change is pending). */
export function applyStarted(outcome: ChangeOutcome | null): outcome is ChangeOutcome {
  return Boolean(outcome && outcome.done + outcome.failed + outcome.notApplied + outcome.applying > 0);
}

/** "198 done, 2 failed, 1 not applied", in the order of the plan's life. */
export function outcomeText(outcome: ChangeOutcome): string {
  const parts: ResourceState[] = ["DONE", "APPLYING", "FAILED", "NOT_APPLIED", "PENDING"];
  return parts
    .filter((state) => count(outcome, state) > 0)
    .map((state) => `${count(outcome, state).toLocaleString()} ${resourceStateLabel(state)}`)
    .join(", ");
}

export function OutcomeSummary({ outcome }: { outcome: ChangeOutcome }) {
  return (
    <p className={`outcome-summary ${outcome.failed ? "has-failures" : ""}`} data-testid="outcome-summary">
      <span className="sr-only">Outcome of the apply: </span>
      {outcomeText(outcome)}
    </p>
  );
}

/** The state filter lives in the address (`?state=failed`), so the failure banner can link to it. */
export function useStateFilter(): [ResourceState | "", (state: ResourceState | "") => void] {
  const [params, setParams] = useSearchParams();
  const raw = (params.get("state") ?? "").toUpperCase();
  const state = STATES.has(raw) ? (raw as ResourceState) : "";
  const set = (next: ResourceState | "") =>
    setParams(
      (current) => {
        const updated = new URLSearchParams(current);
        if (next) updated.set("state", next.toLowerCase());
        else updated.delete("state");
        return updated;
      },
      { replace: true },
    );
  return [state, set];
}

export function StateFilter({ outcome, value, onChange }: { outcome: ChangeOutcome; value: ResourceState | ""; onChange: (state: ResourceState | "") => void }) {
  return (
    <select aria-label="Filter by state" value={value} onChange={(e) => onChange(e.target.value as ResourceState | "")} data-testid="state-filter">
      <option value="">All states</option>
      {ORDER.filter(([state]) => count(outcome, state) > 0 || state === value).map(([state]) => (
        <option key={state} value={state}>
          {resourceStateLabel(state)} ({count(outcome, state).toLocaleString()})
        </option>
      ))}
    </select>
  );
}

/** The anchor of a change's row: the failure banner links to it. */
export function changeAnchor(address: string): string {
  return `change-${address}`;
}

/** Scrolls a change's row into view once when the address's fragment names it. */
export function useScrolledTo(address: string) {
  const { hash } = useLocation();
  const row = useRef<HTMLDivElement>(null);
  const wanted = hash.length > 1 && decodeURIComponent(hash.slice(1)) === changeAnchor(address);
  useEffect(() => {
    if (wanted) row.current?.scrollIntoView({ block: "center" });
  }, [wanted]);
  return row;
}
