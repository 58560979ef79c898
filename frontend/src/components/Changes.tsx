import { memo, useDeferredValue, useMemo, useState } from "react";
import type {
  ChangeAction,
  ChangeItemFragment,
  JsonValue,
  ResourceStateItemFragment,
  RunChangesQuery,
} from "../graphql/generated";
import { plural } from "../format";
import { Empty, ResourceStateBadge } from "./ui";

export type ChangesData = NonNullable<NonNullable<RunChangesQuery["organization"]>["run"]>["changes"];
export type LiveStates = Map<string, ResourceStateItemFragment>;

// Long groups are paged: a plan with thousands of changes renders one page of each group.
const PAGE_SIZE = 50;

const SYMBOL: Record<ChangeAction, string> = { DELETE: "−", REPLACE: "±", UPDATE: "~", CREATE: "+" };

export function ChangesView({ changes, states }: { changes: ChangesData; states: LiveStates }) {
  const [text, setText] = useState("");
  const [type, setType] = useState("");
  const [unit, setUnit] = useState("");
  const query = useDeferredValue(text.trim().toLowerCase());

  const all = useMemo(() => changes.groups.flatMap((g) => g.changes), [changes]);
  const types = useMemo(() => [...new Set(all.map((c) => c.type))].sort(), [all]);
  const units = useMemo(() => [...new Set(all.map((c) => c.unit))].sort(), [all]);
  const filtering = Boolean(query || type || unit);
  const groups = useMemo(
    () =>
      changes.groups.map((group) => ({
        ...group,
        shown: filtering
          ? group.changes.filter(
              (c) =>
                (!type || c.type === type) &&
                (!unit || c.unit === unit) &&
                (!query || c.address.toLowerCase().includes(query) || c.type.toLowerCase().includes(query)),
            )
          : group.changes,
      })),
    [changes, filtering, query, type, unit],
  );

  if (all.length === 0) {
    return <Empty title="No changes.">The plan found nothing to create, update, replace or delete.</Empty>;
  }
  const shownCount = groups.reduce((n, g) => n + g.shown.length, 0);
  return (
    <div className="changes">
      <div className="summary-line" data-testid="summary">
        <SummaryParts summary={changes.summary} />
      </div>
      <div className="filters">
        <input
          type="search"
          placeholder="Filter by address or type"
          aria-label="Filter changes by text"
          value={text}
          onChange={(e) => setText(e.target.value)}
        />
        <select aria-label="Filter by resource type" value={type} onChange={(e) => setType(e.target.value)}>
          <option value="">All types ({types.length})</option>
          {types.map((t) => (
            <option key={t} value={t}>
              {t}
            </option>
          ))}
        </select>
        <select aria-label="Filter by unit" value={unit} onChange={(e) => setUnit(e.target.value)}>
          <option value="">All units ({units.length})</option>
          {units.map((u) => (
            <option key={u} value={u}>
              {u === "." ? ". (root)" : u}
            </option>
          ))}
        </select>
        {filtering && (
          <span className="small muted">
            {plural(shownCount, "match", "matches")} of {all.length.toLocaleString()}
          </span>
        )}
      </div>
      {groups.map((group) => (
        <ChangeGroup key={group.action} action={group.action} title={group.title} count={group.count} items={group.shown} states={states} />
      ))}
    </div>
  );
}

export function SummaryParts({ summary }: { summary: ChangesData["summary"] }) {
  const parts: [ChangeAction, number, string][] = [
    ["DELETE", summary.delete, "delete"],
    ["REPLACE", summary.replace, "replace"],
    ["UPDATE", summary.update, "update"],
    ["CREATE", summary.create, "create"],
  ];
  const shown = parts.filter(([, n]) => n > 0);
  // The server's own text is the reference ("1 delete · 1 replace · …"); it is what the API says.
  return (
    <span className="summary" title={summary.text} aria-label={summary.text}>
      {shown.length === 0
        ? "no changes"
        : shown.map(([action, n, word], i) => (
            <span key={action}>
              {i > 0 && <span className="sep"> · </span>}
              <span className={`act-${action.toLowerCase()}`}>
                {n.toLocaleString()} {word}
              </span>
            </span>
          ))}
    </span>
  );
}

function ChangeGroup({
  action,
  title,
  count,
  items,
  states,
}: {
  action: ChangeAction;
  title: string;
  count: number;
  items: ChangeItemFragment[];
  states: LiveStates;
}) {
  const [page, setPage] = useState(0);
  const [open, setOpen] = useState(true);
  const pages = Math.max(1, Math.ceil(items.length / PAGE_SIZE));
  const current = Math.min(page, pages - 1);
  const slice = items.slice(current * PAGE_SIZE, (current + 1) * PAGE_SIZE);
  return (
    <section className={`group group-${action.toLowerCase()} ${count === 0 ? "empty-group" : ""}`} data-group={action}>
      <header onClick={() => count > 0 && setOpen(!open)}>
        <span className={`act-symbol act-${action.toLowerCase()}`}>{SYMBOL[action]}</span>
        <h3>{title}</h3>
        <span className="count" data-testid="group-count">
          {count.toLocaleString()}
        </span>
        {items.length !== count && <span className="small muted">({items.length.toLocaleString()} shown)</span>}
        <span className="spacer" />
        {count > 0 && <span className="small muted">{open ? "▾" : "▸"}</span>}
      </header>
      {open && count > 0 && (
        <>
          <div className="change-list">
            {slice.map((change) => (
              <ChangeRow key={change.address} change={change} live={states.get(change.address)} />
            ))}
            {items.length === 0 && <div className="muted small pad">Nothing here matches the filter.</div>}
          </div>
          {pages > 1 && (
            <div className="pager">
              <button className="btn small" disabled={current === 0} onClick={() => setPage(current - 1)}>
                ← Previous
              </button>
              <span className="small muted">
                {(current * PAGE_SIZE + 1).toLocaleString()}–{Math.min(items.length, (current + 1) * PAGE_SIZE).toLocaleString()} of{" "}
                {items.length.toLocaleString()}
              </span>
              <button className="btn small" disabled={current >= pages - 1} onClick={() => setPage(current + 1)}>
                Next →
              </button>
            </div>
          )}
        </>
      )}
    </section>
  );
}

const ChangeRow = memo(function ChangeRow({ change, live }: { change: ChangeItemFragment; live?: ResourceStateItemFragment }) {
  const state = live?.state ?? change.state;
  const error = live ? live.error : change.error;
  const stages = live?.stages ?? change.stages;
  const forced = new Set(change.replacedBecause);
  return (
    <div className={`change ${state === "FAILED" ? "failed" : ""}`} data-address={change.address} data-state={state ?? ""}>
      <div className="change-head">
        <span className={`act-symbol act-${change.action.toLowerCase()}`}>{SYMBOL[change.action]}</span>
        <span className="address mono">{change.address}</span>
        <span className="rtype mono">{change.type}</span>
        <span className="unit mono" title={change.unit === "." ? "Unit: the stack's root" : "Unit"}>
          {change.unit}
        </span>
        <span className="spacer" />
        {change.action === "REPLACE" && stages.length > 0 && (
          <span className="stages" data-testid="stages" aria-label="Replacement stages, in the order they ran">
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
        <table className="attrs">
          <tbody>
            {change.attributes.map((attr) => (
              <tr key={attr.name} className={attr.forcesReplacement || forced.has(attr.name) ? "forcing" : ""}>
                <th className="mono">{attr.name}</th>
                <td className="mono">
                  {change.action === "CREATE" ? null : <Value value={attr.before} />}
                  {change.action !== "CREATE" && change.action !== "DELETE" && <span className="arrow"> → </span>}
                  {change.action === "DELETE" ? null : <Value value={attr.after} />}
                  {(attr.forcesReplacement || forced.has(attr.name)) && <span className="tag danger">forces replacement</span>}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
});

function Value({ value }: { value: JsonValue }) {
  if (value === "(sensitive)") return <span className="sensitive">(sensitive)</span>;
  if (value === "(known after apply)") return <span className="unknown">(known after apply)</span>;
  if (value === null) return <span className="null">null</span>;
  const text = JSON.stringify(value);
  return <span className="value">{text.length > 400 ? `${text.slice(0, 400)}…` : text}</span>;
}
