// A run's planned changes as the screens read them, filtered and paged by the server
// (Run.changes with arguments): the counts per group and the filter menus in one small query,
// each group's current page in another. A plan of 10,000 changes costs the browser one page
// (50 changes) per open group, never the whole list.
import { useMemo } from "react";
import { useApiQuery } from "../api/hooks";
import type { ApiError } from "../api/client";
import {
  RunChangeGroupDocument,
  RunChangeOverviewDocument,
  RunDestructiveDocument,
  type ChangeAction,
  type ChangeItemFragment,
  type ResourceState,
  type RunChangeOverviewQuery,
} from "../graphql/generated";

type Overview = NonNullable<NonNullable<RunChangeOverviewQuery["organization"]>["run"]>["changes"];
export type ChangeSummary = Overview["summary"];
export type OutputChangeInfo = Overview["outputs"][number];
export type ChangeOutcome = Overview["outcome"];
/** `state`: a change's state in the apply ("" for any). */
export type ChangeFilters = { text: string; type: string; unit: string; state: ResourceState | "" };
export const NO_FILTERS: ChangeFilters = { text: "", type: "", unit: "", state: "" };

export type ChangeGroupInfo = {
  action: ChangeAction;
  title: string;
  /** Changes in the group, whatever the filters. */
  count: number;
  /** Changes in the group that match the filters. */
  matched: number;
};

export type ChangeOverview = {
  summary: ChangeSummary | null;
  groups: ChangeGroupInfo[];
  /** Resource types and units present in the plan, for the filter menus. */
  types: string[];
  units: string[];
  /** The root module outputs the plan changes (not filtered: the filters are for resources). */
  outputs: OutputChangeInfo[];
  /** How many changes are in each apply state, whatever the filters; null until read. */
  outcome: ChangeOutcome | null;
  total: number;
  matched: number;
  error: ApiError | null;
};

type Source = { org: string; runId: string; /** The run's summary text: the plan exists once it is set. */ planned: string | null };

/** The server's filter arguments: empty means any. */
function filterArgs(filters: ChangeFilters) {
  const text = filters.text.trim();
  return { type: filters.type || null, unit: filters.unit || null, text: text || null, state: filters.state || null };
}

/** Counts per group (all, and matching the filters), the summary and the filter menus. */
export function useChangeOverview({ org, runId, planned }: Source, filters: ChangeFilters, settled?: string): ChangeOverview {
  // Paused until the plan is stored; read again if the summary changes (a new plan) or the run's
  // status does (the apply's outcome).
  const query = useApiQuery(
    RunChangeOverviewDocument,
    { org, id: runId, ...filterArgs(filters) },
    { pause: planned === null, refreshKey: `${planned}|${settled ?? ""}` },
  );
  const changes = planned === null ? null : (query.data?.organization?.run?.changes ?? null);
  const groups = (changes?.groups ?? []).map((g) => ({ action: g.action, title: g.title, count: g.total, matched: g.count }));
  return {
    summary: changes?.summary ?? null,
    groups,
    types: changes?.types ?? [],
    units: changes?.units ?? [],
    outputs: changes?.outputs ?? [],
    outcome: changes?.outcome ?? null,
    total: groups.reduce((n, g) => n + g.count, 0),
    matched: groups.reduce((n, g) => n + g.matched, 0),
    error: query.error,
  };
}

export type ChangePage = {
  items: ChangeItemFragment[];
  /** The cursor of the next page; null on the last. */
  next: string | null;
  loading: boolean;
  error: ApiError | null;
};

/** One page of one group's changes that match the filters, from the server. */
export function useChangePage(
  { org, runId, planned }: Source,
  action: ChangeAction,
  filters: ChangeFilters,
  after: string | null,
  pageSize: number,
): ChangePage {
  const query = useApiQuery(
    RunChangeGroupDocument,
    { org, id: runId, action, first: pageSize, after, ...filterArgs(filters) },
    { pause: planned === null, refreshKey: planned },
  );
  const changes = query.data?.organization?.run?.changes ?? null;
  return {
    items: changes?.nodes ?? [],
    next: changes?.pageInfo.hasNextPage ? (changes.pageInfo.endCursor ?? null) : null,
    loading: !changes && query.loading,
    error: query.error,
  };
}

export type DestructiveChange = { address: string; action: "DELETE" | "REPLACE" };

/** Every address the plan deletes or replaces (what confirm_destructive asks to tick); null until read. */
export function useDestructiveChanges({ org, runId, planned }: Source): DestructiveChange[] | null {
  const query = useApiQuery(RunDestructiveDocument, { org, id: runId }, { pause: planned === null, refreshKey: planned });
  const run = planned === null ? null : (query.data?.organization?.run ?? null);
  return useMemo(
    () =>
      run
        ? [
            ...run.deletions.nodes.map((c) => ({ address: c.address, action: "DELETE" as const })),
            ...run.replacements.nodes.map((c) => ({ address: c.address, action: "REPLACE" as const })),
          ]
        : null,
    [run],
  );
}
