import { memo, useDeferredValue, useState } from "react";
import { useSearchParams } from "react-router";
import type { ChangeAction, ChangeItemFragment, ResourceStateItemFragment } from "../graphql/generated";
import {
  NO_FILTERS,
  useChangeOverview,
  useChangePage,
  type ChangeFilters,
  type ChangeGroupInfo,
  type ChangeSummary,
  type OutputChangeInfo,
} from "../data/changes";
import { diffAttribute } from "../diff/attributes";
import { plural } from "../format";
import { Address } from "./Address";
import { AttributeDiff } from "./AttributeDiff";
import { applyStarted, changeAnchor, OutcomeSummary, StateFilter, useScrolledTo, useStateFilter } from "./ChangeOutcome";
import { Empty, ErrorBox, Loading, ResourceStateBadge } from "./ui";

export type LiveStates = Map<string, ResourceStateItemFragment>;

// Long groups are paged: a plan with thousands of changes renders one page of each group.
const PAGE_SIZE = 50;

const SYMBOL: Record<ChangeAction, string> = { DELETE: "−", REPLACE: "±", UPDATE: "~", CREATE: "+" };

export function ChangesView({
  org,
  runId,
  planned,
  settled,
  states,
  empty,
}: {
  org: string;
  runId: string;
  /** The run's summary text, once the plan is stored. */
  planned: string | null;
  /** The run's status: the counts (and the apply's outcome) are read again when it changes. */
  settled?: string;
  states: LiveStates;
  /** What to show while there is no plan. */
  empty: React.ReactNode;
}) {
  // The filters live in the address (?q=, ?type=, ?unit=, ?state=): a reload, a shared link or
  // Back shows the same list.
  const [params, setParams] = useSearchParams();
  const text = params.get("q") ?? "";
  const type = params.get("type") ?? "";
  const unit = params.get("unit") ?? "";
  const setParam = (name: string, value: string) =>
    setParams(
      (current) => {
        const next = new URLSearchParams(current);
        if (value) next.set(name, value);
        else next.delete(name);
        return next;
      },
      { replace: true, preventScrollReset: true },
    );
  const setText = (value: string) => setParam("q", value);
  const setType = (value: string) => setParam("type", value);
  const setUnit = (value: string) => setParam("unit", value);
  const [state, setState] = useStateFilter();
  const filters = { ...NO_FILTERS, text: useDeferredValue(text), type, unit, state };
  const source = { org, runId, planned };
  const overview = useChangeOverview(source, filters, settled);

  if (planned === null) return <>{empty}</>;
  if (!overview.summary) return overview.error ? <ErrorBox error={overview.error} /> : <Loading what="the changes" />;
  if (overview.total === 0 && overview.outputs.length === 0) {
    return <Empty title="No changes.">The plan found nothing to create, update, replace or delete.</Empty>;
  }
  const filtering = Boolean(filters.text.trim() || type || unit || state);
  // A group's pages start again at the first whenever the filters change.
  const filterKey = `${filters.text.trim()}|${type}|${unit}|${state}`;
  const outcome = applyStarted(overview.outcome) ? overview.outcome : null;
  return (
    <div className="changes">
      <div className="summary-line" data-testid="summary">
        <SummaryParts summary={overview.summary} />
      </div>
      {outcome && <OutcomeSummary outcome={outcome} />}
      <div className="filters">
        <input
          type="search"
          placeholder="Filter by address or type"
          aria-label="Filter changes by text"
          value={text}
          onChange={(e) => setText(e.target.value)}
        />
        <select aria-label="Filter by resource type" value={type} onChange={(e) => setType(e.target.value)}>
          <option value="">All types ({overview.types.length})</option>
          {overview.types.map((t) => (
            <option key={t} value={t}>
              {t}
            </option>
          ))}
        </select>
        <select aria-label="Filter by unit" value={unit} onChange={(e) => setUnit(e.target.value)}>
          <option value="">All units ({overview.units.length})</option>
          {overview.units.map((u) => (
            <option key={u} value={u}>
              {u === "." ? ". (root)" : u}
            </option>
          ))}
        </select>
        {outcome && <StateFilter outcome={outcome} value={state} onChange={setState} />}
        {filtering && (
          <span className="small muted" role="status" data-testid="filter-matches">
            {plural(overview.matched, "match", "matches")} of {overview.total.toLocaleString()}
          </span>
        )}
      </div>
      {/* A group the plan has nothing in says nothing: only groups with changes are shown. */}
      {overview.groups.filter((group) => group.count > 0).map((group) => (
        <ChangeGroup key={`${group.action}|${filterKey}`} source={source} group={group} filters={filters} states={states} />
      ))}
      {overview.outputs.length > 0 && <OutputChanges outputs={overview.outputs} />}
    </div>
  );
}

function shownValue(value: unknown): string {
  if (value === null || value === undefined) return "null";
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** The outputs the plan changes: applying the plan saves them in the state. Sensitive ones read
 * "(sensitive)" (the server never sends their values). */
function OutputChanges({ outputs }: { outputs: OutputChangeInfo[] }) {
  return (
    <section className="change-group" data-testid="output-changes">
      <h3>
        Changes to outputs <span className="muted small">({outputs.length})</span>
      </h3>
      <ul className="output-changes">
        {outputs.map((o) => (
          <li key={`${o.unit}|${o.name}`} data-output={o.name} className={`act-${o.action.toLowerCase()}`}>
            <span className="symbol">{SYMBOL[o.action]}</span> <code>{o.unit === "." ? o.name : `${o.unit}: ${o.name}`}</code>
            {o.action !== "CREATE" && <> {shownValue(o.before)}</>}
            {o.action === "UPDATE" && " →"}
            {o.action !== "DELETE" && <> {shownValue(o.after)}</>}
          </li>
        ))}
      </ul>
    </section>
  );
}

export function SummaryParts({ summary }: { summary: ChangeSummary }) {
  const parts: [ChangeAction, number, string][] = [
    ["DELETE", summary.delete, "delete"],
    ["REPLACE", summary.replace, "replace"],
    ["UPDATE", summary.update, "update"],
    ["CREATE", summary.create, "create"],
  ];
  const shown = parts.filter(([, n]) => n > 0);
  const outputs = summary.outputs ?? 0;
  // The server's own text is the reference ("1 delete · 1 replace · …"); it is what the API says.
  return (
    <span className="summary" title={summary.text}>
      {shown.length === 0 && outputs === 0
        ? "no changes"
        : shown.map(([action, n, word], i) => (
            <span key={action}>
              {i > 0 && <span className="sep"> · </span>}
              <span className={`act-${action.toLowerCase()}`}>
                {n.toLocaleString()} {word}
              </span>
            </span>
          ))}
      {outputs > 0 && (
        <span>
          {shown.length > 0 && <span className="sep"> · </span>}
          <span className="act-outputs">{plural(outputs, "output change", "output changes")}</span>
        </span>
      )}
    </span>
  );
}

function ChangeGroup({
  source,
  group,
  filters,
  states,
}: {
  source: { org: string; runId: string; planned: string | null };
  group: ChangeGroupInfo;
  filters: ChangeFilters;
  states: LiveStates;
}) {
  const [open, setOpen] = useState(true);
  // The cursors of the pages read so far: the last one is the page shown.
  const [cursors, setCursors] = useState<(string | null)[]>([null]);
  const { action, title, count, matched } = group;
  const page = cursors.length - 1;
  const id = `group-${action.toLowerCase()}`;
  return (
    <section className={`group group-${action.toLowerCase()} ${count === 0 ? "empty-group" : ""}`} data-group={action} aria-labelledby={`${id}-title`}>
      <header onClick={() => count > 0 && setOpen(!open)}>
        <span className={`act-symbol act-${action.toLowerCase()}`} aria-hidden="true">
          {SYMBOL[action]}
        </span>
        <h3 id={`${id}-title`}>
          {count > 0 ? (
            <button
              type="button"
              className="group-toggle"
              aria-expanded={open}
              aria-controls={`${id}-list`}
              onClick={(e) => {
                e.stopPropagation();
                setOpen(!open);
              }}
            >
              {title}
            </button>
          ) : (
            title
          )}
        </h3>
        <span className="count" data-testid="group-count">
          {count.toLocaleString()}
        </span>
        {matched !== count && <span className="small muted">({matched.toLocaleString()} shown)</span>}
        <span className="spacer" />
        {count > 0 && (
          <span className="small muted" aria-hidden="true">
            {open ? "▾" : "▸"}
          </span>
        )}
      </header>
      {open && count > 0 && (
        <div id={`${id}-list`}>
          {matched === 0 ? (
            <div className="change-list">
              <div className="muted small pad">Nothing here matches the filter.</div>
            </div>
          ) : (
            <GroupPage
              source={source}
              action={action}
              title={title}
              filters={filters}
              states={states}
              after={cursors[page]}
              offset={page * PAGE_SIZE}
              matched={matched}
              onPrevious={page > 0 ? () => setCursors(cursors.slice(0, -1)) : null}
              onNext={(next) => setCursors([...cursors, next])}
            />
          )}
        </div>
      )}
    </section>
  );
}

/** One page of a group, read from the server, with the pager under it. */
function GroupPage({
  source,
  action,
  title,
  filters,
  states,
  after,
  offset,
  matched,
  onPrevious,
  onNext,
}: {
  source: { org: string; runId: string; planned: string | null };
  action: ChangeAction;
  title: string;
  filters: ChangeFilters;
  states: LiveStates;
  after: string | null;
  offset: number;
  matched: number;
  onPrevious: (() => void) | null;
  onNext: (next: string) => void;
}) {
  const { items, next, loading, error } = useChangePage(source, action, filters, after, PAGE_SIZE);
  if (error) return <ErrorBox error={error} />;
  if (loading) return <Loading what={`the changes of “${title}”`} />;
  return (
    <>
      <div className="change-list">
        {items.map((change) => (
          <ChangeRow key={change.address} change={change} live={states.get(change.address)} />
        ))}
      </div>
      {matched > PAGE_SIZE && (
        <nav className="pager" aria-label={`Pages of ${title.toLowerCase()}`}>
          <button className="btn small" disabled={!onPrevious} onClick={() => onPrevious?.()}>
            ← Previous
          </button>
          <span className="small muted">
            {(offset + 1).toLocaleString()}–{Math.min(matched, offset + items.length).toLocaleString()} of {matched.toLocaleString()}
          </span>
          <button className="btn small" disabled={!next} onClick={() => next && onNext(next)}>
            Next →
          </button>
        </nav>
      )}
    </>
  );
}

const ChangeRow = memo(function ChangeRow({ change, live }: { change: ChangeItemFragment; live?: ResourceStateItemFragment }) {
  const state = live?.state ?? change.state;
  const error = live ? live.error : change.error;
  const stages = live?.stages ?? change.stages;
  const forced = new Set(change.replacedBecause);
  const row = useScrolledTo(change.address);
  return (
    <div ref={row} id={changeAnchor(change.address)} className={`change ${state === "FAILED" ? "failed" : ""}`} data-address={change.address} data-state={state ?? ""}>
      <div className="change-head">
        <span className={`act-symbol act-${change.action.toLowerCase()}`} aria-hidden="true">
          {SYMBOL[change.action]}
        </span>
        <Address address={change.address} />
        <span className="rtype mono">{change.type}</span>
        <span className="unit mono" title={change.unit === "." ? "Unit: the stack's root" : "Unit"}>
          {change.unit}
        </span>
        <span className="spacer" />
        {change.action === "REPLACE" && stages.length > 0 && (
          <span className="stages" data-testid="stages" aria-label="Replacement stages, in the order they ran" role="group">
            {stages.map((stage, i) => (
              <span key={i} className="stage">
                {i > 0 && <span className="muted"> → </span>}
                {stage.action.toLowerCase()} {stage.state && <ResourceStateBadge state={stage.state} />}
              </span>
            ))}
          </span>
        )}
        {state && <ResourceStateBadge state={state} />}
      </div>
      {change.action === "REPLACE" && change.replacedBecause.length > 0 && (
        <div className="forces small">
          Replaced because <span className="mono">{change.replacedBecause.join(", ")}</span>{" "}
          {change.replacedBecause.length === 1 ? "changes" : "change"}
        </div>
      )}
      {error && <pre className="resource-error">{error}</pre>}
      {change.attributes.length > 0 && (
        <div className="attrs-box" tabIndex={0} role="group" aria-label={`Attributes of ${change.address}`}>
          <table className="attrs">
            <tbody>
              {change.attributes.map((attr) => {
                const forcing = attr.forcesReplacement || forced.has(attr.name);
                return (
                  <tr key={attr.name} className={forcing ? "forcing" : ""} data-attribute={attr.name}>
                    <th className="mono" scope="row">
                      {attr.name}
                    </th>
                    <td className="mono">
                      <AttributeDiff node={diffAttribute(attr.name, change.action, attr.before, attr.after)} />
                      {forcing && <span className="tag danger">forces replacement</span>}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
});
