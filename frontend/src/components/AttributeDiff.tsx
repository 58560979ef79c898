import { useState, type ReactNode } from "react";
import type { JsonValue } from "../graphql/generated";
import { SENSITIVE, SENSITIVE_CHANGED, UNKNOWN, isObject, type DiffNode, type LineOp } from "../diff/attributes";
import { plural } from "../format";

// Long values are cut on screen; the plan itself is what gets applied.
const MAX_STRING = 400;
// Runs of unchanged lines longer than this fold, keeping this many lines of context each side.
const LINE_CONTEXT = 3;

const KIND_LABEL: Record<DiffNode["kind"], string> = {
  added: "added",
  removed: "removed",
  changed: "changed",
  nested: "changed",
  lines: "changed",
  same: "unchanged",
};
const KIND_SYMBOL: Record<DiffNode["kind"], string> = {
  added: "+",
  removed: "−",
  changed: "~",
  nested: "~",
  lines: "~",
  same: " ",
};

/** One value as tokens that never break inside: strings, numbers, markers such as (sensitive). */
export function Token({ value }: { value: JsonValue }) {
  if (value === SENSITIVE) return <span className="tok sensitive">(sensitive)</span>;
  if (value === SENSITIVE_CHANGED) return <span className="tok sensitive" data-sensitive-changed="">sensitive value changed</span>;
  if (value === UNKNOWN) return <span className="tok unknown">(known after apply)</span>;
  if (value === null) return <span className="tok null">null</span>;
  if (typeof value === "string") {
    const text = JSON.stringify(value.length > MAX_STRING ? `${value.slice(0, MAX_STRING)}…` : value);
    return <span className="tok str">{text}</span>;
  }
  if (typeof value === "number" || typeof value === "boolean") return <span className="tok lit">{String(value)}</span>;
  return <InlineJson value={value} />;
}

/** An object or list on one line that may wrap between its tokens, never inside one. */
function InlineJson({ value }: { value: JsonValue[] | { [key: string]: JsonValue } }) {
  const list = Array.isArray(value);
  const entries: [string | null, JsonValue][] = list ? value.map((v) => [null, v]) : Object.entries(value);
  return (
    <span className="inline-json">
      <span className="punct">{list ? "[" : "{"}</span>
      {entries.map(([key, v], i) => (
        <span key={key ?? i} className="entry">
          {" "}
          {key !== null && <span className="tok key">{key} =</span>} <Token value={v} />
          {i < entries.length - 1 && <span className="punct">,</span>}
        </span>
      ))}
      {entries.length > 0 && " "}
      <span className="punct">{list ? "]" : "}"}</span>
    </span>
  );
}

function Arrow() {
  return <span className="arrow">{" → "}</span>;
}

/** A multi-line string added or removed whole, line by line. */
function LinesBlock({ text, op }: { text: string; op: LineOp["op"] }) {
  return <LineDiff lines={text.split("\n").map((line) => ({ op, text: line }))} />;
}

function LineDiff({ lines }: { lines: LineOp[] }) {
  const [open, setOpen] = useState(false);
  // Fold long runs of unchanged lines, keeping context around each change.
  const keep = lines.map(() => open);
  if (!open) {
    lines.forEach((line, i) => {
      if (line.op === "same") return;
      for (let j = Math.max(0, i - LINE_CONTEXT); j <= Math.min(lines.length - 1, i + LINE_CONTEXT); j++) keep[j] = true;
    });
  }
  const rows: ReactNode[] = [];
  let hidden = 0;
  const flush = (at: number) => {
    if (hidden === 0) return;
    rows.push(
      <div key={`fold-${at}`} className="ld-fold">
        <button type="button" className="linklike" onClick={() => setOpen(true)}>
          {plural(hidden, "unchanged line")}
        </button>
      </div>,
    );
    hidden = 0;
  };
  lines.forEach((line, i) => {
    if (!keep[i]) {
      hidden++;
      return;
    }
    flush(i);
    rows.push(
      <div key={i} className={`ld-line ld-${line.op}`} data-line-op={line.op}>
        <span className="ld-sym" aria-hidden="true">
          {line.op === "added" ? "+" : line.op === "removed" ? "−" : " "}
        </span>
        <span className="sr-only">{line.op === "same" ? "" : `${line.op}: `}</span>
        <span className="ld-text">{line.text || " "}</span>
      </div>,
    );
  });
  flush(lines.length);
  return <div className="line-diff">{rows}</div>;
}

/** A value that is added or removed whole (or shown as created): nested values as a tree. */
function WholeValue({ value, op }: { value: JsonValue; op: LineOp["op"] }) {
  if (typeof value === "string" && value.includes("\n")) return <LinesBlock text={value} op={op} />;
  return <Token value={value} />;
}

function NestedDiff({ node }: { node: Extract<DiffNode, { kind: "nested" }> }) {
  const [showSame, setShowSame] = useState(false);
  const same = node.children.filter((child) => child.kind === "same").length;
  const shown = showSame ? node.children : node.children.filter((child) => child.kind !== "same");
  return (
    <span className="diff-nested">
      <span className="punct">{node.list ? "[" : "{"}</span>
      <ul className="diff-children">
        {shown.map((child) => (
          <DiffRow key={child.path} node={child} list={node.list} />
        ))}
        {same > 0 && (
          <li className="diff-fold">
            <button type="button" className="linklike" aria-expanded={showSame} onClick={() => setShowSame(!showSame)}>
              {showSame ? "Hide" : "Show"} {plural(same, node.list ? "unchanged element" : "unchanged key")}
            </button>
          </li>
        )}
      </ul>
      <span className="punct">{node.list ? "]" : "}"}</span>
    </span>
  );
}

function DiffRow({ node, list }: { node: DiffNode; list: boolean }) {
  return (
    <li className={`diff-row diff-${node.kind}`} data-diff-path={node.path} data-diff-kind={node.kind === "nested" || node.kind === "lines" ? "changed" : node.kind}>
      <span className="diff-sym" aria-hidden="true">
        {KIND_SYMBOL[node.kind]}
      </span>
      <span className="sr-only">{KIND_LABEL[node.kind]}: </span>
      <span className="tok key">{list ? `[${node.key}]` : node.key}</span>
      <span className="punct"> = </span>
      <DiffBody node={node} />
    </li>
  );
}

function DiffBody({ node }: { node: DiffNode }) {
  switch (node.kind) {
    case "same":
      return <Token value={node.value} />;
    case "added":
      return <WholeValue value={node.value} op="added" />;
    case "removed":
      return <WholeValue value={node.value} op="removed" />;
    case "changed":
      // A secret that changed: said in words, with neither value (the server never sends them).
      if (node.before === SENSITIVE && node.after === SENSITIVE_CHANGED) return <Token value={node.after} />;
      return (
        <span className="diff-change">
          <Token value={node.before} />
          <Arrow />
          <Token value={node.after} />
        </span>
      );
    case "nested":
      return <NestedDiff node={node} />;
    case "lines":
      return <LineDiff lines={node.lines} />;
  }
}

/** An attribute's diff, as the body of its row (the attribute's name is the row's header). */
export function AttributeDiff({ node }: { node: DiffNode }) {
  if (node.kind === "added" && isObject(node.value)) {
    return <NestedDiff node={{ kind: "nested", key: node.key, path: node.path, list: false, children: objectAsAdded(node.path, node.value, "added") }} />;
  }
  if (node.kind === "removed" && isObject(node.value)) {
    return <NestedDiff node={{ kind: "nested", key: node.key, path: node.path, list: false, children: objectAsAdded(node.path, node.value, "removed") }} />;
  }
  return <DiffBody node={node} />;
}

function objectAsAdded(path: string, value: { [key: string]: JsonValue }, kind: "added" | "removed"): DiffNode[] {
  return Object.keys(value)
    .sort()
    .map((key) => ({ kind, key, path: `${path}.${key}`, value: value[key] }));
}
