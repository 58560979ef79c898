import { memo, useDeferredValue, useState } from "react";
import type { ChangeAction, ChangeItemFragment, ResourceStateItemFragment } from "../graphql/generated";
import { NO_FILTERS, useChangeList, type ChangeGroupPage, type ChangeSummary } from "../data/changes";
import { diffAttribute } from "../diff/attributes";
import { plural } from "../format";
import { AttributeDiff } from "./AttributeDiff";
import { Empty, ErrorBox, Loading, ResourceStateBadge } from "./ui";

export type LiveStates = Map<string, ResourceStateItemFragment>;

// Long groups are paged: a plan with thousands of changes renders one page of each group.
const PAGE_SIZE = 50;

const SYMBOL: Record<ChangeAction, string> = { DELETE: "−", REPLACE: "±", UPDATE: "~", CREATE: "+" };

export function ChangesView({
  org,
  runId,
  planned,
  states,
  empty,
}: {
  org: string;
  runId: string;
  /** The run's summary text, once the plan is stored. */
  planned: string | null;
  states: LiveStates;
  /** What to show while there is no plan. */
  empty: React.ReactNode;
}) {
  const [text, setText] = useState("");
  const [type, setType] = useState("");
  const [unit, setUnit] = useState("");
  const [pages, setPages] = useState<Partial<Record<ChangeAction, number>>>({});
  const filters = { ...NO_FILTERS, text: useDeferredValue(text), type, unit };
  const list = useChangeList({ org, runId, planned }, filters, pages, PAGE_SIZE);

  if (planned === null) return <>{empty}</>;
  if (!list.summary) return list.error ? <ErrorBox error={list.error} /> : <Loading what="the changes" />;
  if (list.total === 0) {
    return <Empty title="No changes.">The plan found nothing to create, update, replace or delete.</Empty>;
  }
  const filtering = Boolean(filters.text.trim() || type || unit);
  return (
    <div className="changes">
      <div className="summary-line" data-testid="summary">
        <SummaryParts summary={list.summary} />
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
          <option value="">All types ({list.types.length})</option>
          {list.types.map((t) => (
            <option key={t} value={t}>
              {t}
            </option>
          ))}
        </select>
        <select aria-label="Filter by unit" value={unit} onChange={(e) => setUnit(e.target.value)}>
          <option value="">All units ({list.units.length})</option>
          {list.units.map((u) => (
            <option key={u} value={u}>
              {u === "." ? ". (root)" : u}
            </option>
          ))}
        </select>
        {filtering && (
          <span className="small muted" role="status">
            {plural(list.matched, "match", "matches")} of {list.total.toLocaleString()}
          </span>
        )}
      </div>
      {list.groups.map((group) => (
        <ChangeGroup key={group.action} group={group} states={states} onPage={(page) => setPages({ ...pages, [group.action]: page })} />
      ))}
    </div>
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
  // The server's own text is the reference ("1 delete · 1 replace · …"); it is what the API says.
  return (
    <span className="summary" title={summary.text}>
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

function ChangeGroup({ group, states, onPage }: { group: ChangeGroupPage; states: LiveStates; onPage: (page: number) => void }) {
  const [open, setOpen] = useState(true);
  const { action, title, count, matched, items, page, pages, offset } = group;
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
          <div className="change-list">
            {items.map((change) => (
              <ChangeRow key={change.address} change={change} live={states.get(change.address)} />
            ))}
            {matched === 0 && <div className="muted small pad">Nothing here matches the filter.</div>}
          </div>
          {pages > 1 && (
            <nav className="pager" aria-label={`Pages of ${title.toLowerCase()}`}>
              <button className="btn small" disabled={page === 0} onClick={() => onPage(page - 1)}>
                ← Previous
              </button>
              <span className="small muted">
                {(offset + 1).toLocaleString()}–{Math.min(matched, offset + items.length).toLocaleString()} of {matched.toLocaleString()}
              </span>
              <button className="btn small" disabled={page >= pages - 1} onClick={() => onPage(page + 1)}>
                Next →
              </button>
            </nav>
          )}
        </div>
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
        <span className={`act-symbol act-${change.action.toLowerCase()}`} aria-hidden="true">
          {SYMBOL[change.action]}
        </span>
        <span className="address mono">{change.address}</span>
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
