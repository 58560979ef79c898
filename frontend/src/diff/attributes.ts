// An attribute's before and after, diffed key by key: objects by key, lists by element (longest
// common subsequence, so an inserted element is one addition, not a change to every one after
// it), multi-line strings by line. Pure: no React, no I/O.
import { diffArrays, diffLines } from "diff";
import type { JsonValue } from "../graphql/generated";

export const SENSITIVE = "(sensitive)";
/** The server's word for a sensitive value whose digest changed; neither value is ever sent. */
export const SENSITIVE_CHANGED = "(sensitive value changed)";
export const UNKNOWN = "(known after apply)";

export type LineOp = { op: "added" | "removed" | "same"; text: string };

export type DiffNode =
  | { kind: "same"; key: string; path: string; value: JsonValue }
  | { kind: "added"; key: string; path: string; value: JsonValue }
  | { kind: "removed"; key: string; path: string; value: JsonValue }
  | { kind: "changed"; key: string; path: string; before: JsonValue; after: JsonValue }
  | { kind: "nested"; key: string; path: string; list: boolean; children: DiffNode[] }
  | { kind: "lines"; key: string; path: string; lines: LineOp[] };

type JsonObject = { [key: string]: JsonValue };

export function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function sameValue(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((v, i) => sameValue(v, b[i]));
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((k) => k in b && sameValue(a[k], b[k]));
  }
  return false;
}

function isMultiline(value: JsonValue | undefined): value is string {
  return typeof value === "string" && value.includes("\n");
}

function childPath(path: string, key: string, list: boolean): string {
  return list ? `${path}[${key}]` : /^[A-Za-z_][A-Za-z0-9_-]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

function lineOps(before: string, after: string): LineOp[] {
  const ops: LineOp[] = [];
  for (const part of diffLines(before, after)) {
    const op = part.added ? "added" : part.removed ? "removed" : "same";
    const lines = part.value.endsWith("\n") ? part.value.slice(0, -1).split("\n") : part.value.split("\n");
    for (const text of lines) ops.push({ op, text });
  }
  return ops;
}

/**
 * How `before` became `after`, under `key` at `path`. Values equal on both sides are `same`
 * (a screen folds them away); a marker such as "(sensitive)" is an opaque value.
 */
export function diffValue(key: string, path: string, before: JsonValue | undefined, after: JsonValue | undefined): DiffNode {
  if (before === undefined) return { kind: "added", key, path, value: after ?? null };
  if (after === undefined) return { kind: "removed", key, path, value: before };
  if (sameValue(before, after)) return { kind: "same", key, path, value: after };
  if (isObject(before) && isObject(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
    return {
      kind: "nested",
      key,
      path,
      list: false,
      children: keys.map((k) => diffValue(k, childPath(path, k, false), before[k], after[k])),
    };
  }
  if (Array.isArray(before) && Array.isArray(after)) {
    return { kind: "nested", key, path, list: true, children: diffList(path, before, after) };
  }
  if ((isMultiline(before) || isMultiline(after)) && typeof before === "string" && typeof after === "string") {
    return { kind: "lines", key, path, lines: lineOps(before, after) };
  }
  return { kind: "changed", key, path, before, after };
}

function diffList(path: string, before: JsonValue[], after: JsonValue[]): DiffNode[] {
  const out: DiffNode[] = [];
  let oldIndex = 0;
  let newIndex = 0;
  const parts = diffArrays(before, after, { comparator: (a, b) => sameValue(a, b) });
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i];
    const next = parts[i + 1];
    if (part.removed && next?.added) {
      // Elements replaced in place: diff them pairwise, so a changed key in a list of objects
      // reads as that key, not as a removed and an added object.
      const paired = Math.min(part.value.length, next.value.length);
      for (let j = 0; j < paired; j++) {
        const k = String(newIndex + j);
        out.push(diffValue(k, childPath(path, k, true), part.value[j], next.value[j]));
      }
      for (let j = paired; j < part.value.length; j++) {
        const k = String(oldIndex + j);
        out.push({ kind: "removed", key: k, path: childPath(path, k, true), value: part.value[j] });
      }
      for (let j = paired; j < next.value.length; j++) {
        const k = String(newIndex + j);
        out.push({ kind: "added", key: k, path: childPath(path, k, true), value: next.value[j] });
      }
      oldIndex += part.value.length;
      newIndex += next.value.length;
      i++;
      continue;
    }
    for (const value of part.value) {
      if (part.added) {
        const k = String(newIndex++);
        out.push({ kind: "added", key: k, path: childPath(path, k, true), value });
      } else if (part.removed) {
        const k = String(oldIndex++);
        out.push({ kind: "removed", key: k, path: childPath(path, k, true), value });
      } else {
        const k = String(newIndex);
        oldIndex++;
        newIndex++;
        out.push({ kind: "same", key: k, path: childPath(path, k, true), value });
      }
    }
  }
  return out;
}

/**
 * A planned attribute change. The server lists only attributes that change, so one whose two
 * sides read the same (a sensitive value changed, say) is still shown as changed.
 */
export function diffAttribute(
  name: string,
  action: "CREATE" | "DELETE" | "UPDATE" | "REPLACE",
  before: JsonValue,
  after: JsonValue,
): DiffNode {
  if (action === "CREATE") return { kind: "added", key: name, path: name, value: after };
  if (action === "DELETE") return { kind: "removed", key: name, path: name, value: before };
  const node = diffValue(name, name, before, after);
  return node.kind === "same" ? { kind: "changed", key: name, path: name, before, after } : node;
}

/** How many keys (at any depth) a nested diff adds, removes or changes. */
export function countChanges(node: DiffNode): number {
  if (node.kind === "nested") return node.children.reduce((n, child) => n + countChanges(child), 0);
  return node.kind === "same" ? 0 : 1;
}
