// A run's planned changes as the screens read them: one data hook, so that moving filtering and
// paging to the server (Run.changes with arguments) changes this file and nothing that shows them.
// Today the whole list is read once (one query, shared by every caller through the cache) and
// filtered and paged here.
import { useMemo } from "react";
import { useApiQuery } from "../api/hooks";
import type { ApiError } from "../api/client";
import { RunChangesDocument, type ChangeAction, type ChangeItemFragment, type RunChangesQuery } from "../graphql/generated";

export type ChangeSummary = NonNullable<NonNullable<RunChangesQuery["organization"]>["run"]>["changes"]["summary"];
export type ChangeFilters = { text: string; type: string; unit: string };
export const NO_FILTERS: ChangeFilters = { text: "", type: "", unit: "" };

export type ChangeGroupPage = {
  action: ChangeAction;
  title: string;
  /** Changes in the group, whatever the filters. */
  count: number;
  /** Changes in the group that match the filters. */
  matched: number;
  /** The requested page of the matching changes. */
  items: ChangeItemFragment[];
  page: number;
  pages: number;
  /** Position of the page's first item among the matching ones (0-based). */
  offset: number;
};

export type ChangeList = {
  summary: ChangeSummary | null;
  groups: ChangeGroupPage[];
  /** Resource types and units present in the plan, for the filter menus. */
  types: string[];
  units: string[];
  total: number;
  matched: number;
  loading: boolean;
  error: ApiError | null;
};

type Source = { org: string; runId: string; /** The run's summary text: the plan exists once it is set. */ planned: string | null };

function useAllChanges({ org, runId, planned }: Source) {
  // Paused until the plan is stored; read again if the summary changes (a new plan).
  const query = useApiQuery(RunChangesDocument, { org, id: runId }, { pause: planned === null, refreshKey: planned });
  const changes = planned === null ? null : (query.data?.organization?.run?.changes ?? null);
  return { changes, loading: planned !== null && !changes && query.loading, error: query.error };
}

function matches(change: ChangeItemFragment, filters: ChangeFilters, text: string): boolean {
  return (
    (!filters.type || change.type === filters.type) &&
    (!filters.unit || change.unit === filters.unit) &&
    (!text || change.address.toLowerCase().includes(text) || change.type.toLowerCase().includes(text))
  );
}

/** One page of each group of changes, filtered; `pages` is the page wanted per group (0-based). */
export function useChangeList(
  source: Source,
  filters: ChangeFilters,
  pages: Partial<Record<ChangeAction, number>>,
  pageSize: number,
): ChangeList {
  const { changes, loading, error } = useAllChanges(source);
  const text = filters.text.trim().toLowerCase();
  const filtering = Boolean(text || filters.type || filters.unit);

  const base = useMemo(() => {
    const all = changes?.groups.flatMap((g) => g.changes) ?? [];
    return {
      all,
      types: [...new Set(all.map((c) => c.type))].sort(),
      units: [...new Set(all.map((c) => c.unit))].sort(),
    };
  }, [changes]);

  const filtered = useMemo(
    () =>
      (changes?.groups ?? []).map((group) => ({
        group,
        matching: filtering ? group.changes.filter((c) => matches(c, filters, text)) : group.changes,
      })),
    [changes, filtering, text, filters.type, filters.unit],
  );

  const groups = filtered.map(({ group, matching }) => {
    const pageCount = Math.max(1, Math.ceil(matching.length / pageSize));
    const page = Math.min(pages[group.action] ?? 0, pageCount - 1);
    return {
      action: group.action,
      title: group.title,
      count: group.count,
      matched: matching.length,
      items: matching.slice(page * pageSize, (page + 1) * pageSize),
      page,
      pages: pageCount,
      offset: page * pageSize,
    };
  });

  return {
    summary: changes?.summary ?? null,
    groups,
    types: base.types,
    units: base.units,
    total: base.all.length,
    matched: groups.reduce((n, g) => n + g.matched, 0),
    loading,
    error,
  };
}

export type DestructiveChange = { address: string; action: "DELETE" | "REPLACE" };

/** Every address the plan deletes or replaces (what confirm_destructive asks to tick); null until read. */
export function useDestructiveChanges(source: Source): DestructiveChange[] | null {
  const { changes } = useAllChanges(source);
  return useMemo(
    () =>
      changes
        ? changes.groups
            .filter((g) => g.action === "DELETE" || g.action === "REPLACE")
            .flatMap((g) => g.changes.map((c) => ({ address: c.address, action: g.action as DestructiveChange["action"] })))
        : null,
    [changes],
  );
}
