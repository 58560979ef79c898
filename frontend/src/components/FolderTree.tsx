import { useEffect, useMemo, useRef, useState, type KeyboardEvent } from "react";
import { Link, useNavigate } from "react-router";
import { summaryParts } from "../data/stackSummary";
import type { StackTreeItemFragment } from "../graphql/generated";
import { StatusBadge, TimeAgo, TypeBadge } from "./ui";

export type FolderNode = { path: string; name: string; stacks: StackTreeItemFragment[]; children: FolderNode[] };

/** One row of the tree as the keyboard sees it: its id, where it leads, its parent. */
type Item = { id: string; href: string; parent: string | null; folder: FolderNode | null };

const folderId = (path: string) => `folder:${path}`;
const stackId = (slug: string) => `stack:${slug}`;

/** The rows a reader can reach now: everything but what is inside a collapsed folder. */
function visibleItems(org: string, folders: FolderNode[], rootStacks: StackTreeItemFragment[], collapsed: ReadonlySet<string>): Item[] {
  const items: Item[] = [];
  const walk = (nodes: FolderNode[], stacks: StackTreeItemFragment[], parent: string | null) => {
    for (const node of nodes) {
      const id = folderId(node.path);
      items.push({ id, href: `/orgs/${org}/folders/${node.path}`, parent, folder: node });
      if (!collapsed.has(node.path)) walk(node.children, node.stacks, id);
    }
    for (const stack of stacks) items.push({ id: stackId(stack.slug), href: `/orgs/${org}/stacks/${stack.slug}`, parent, folder: null });
  };
  walk(folders, rootStacks, null);
  return items;
}

/**
 * Folders and their stacks as a tree view (WAI-ARIA treeview pattern): one tab stop; Up and Down
 * move between rows, Right opens a folder or enters it, Left closes it or goes to its parent,
 * Home and End jump to the first and last row, Enter opens the row's page.
 */
export function FolderTree({ org, folders, rootStacks }: { org: string; folders: FolderNode[]; rootStacks: StackTreeItemFragment[] }) {
  const navigate = useNavigate();
  const [collapsed, setCollapsed] = useState<ReadonlySet<string>>(new Set());
  const items = useMemo(() => visibleItems(org, folders, rootStacks, collapsed), [org, folders, rootStacks, collapsed]);
  const [focused, setFocused] = useState<string | null>(null);
  const current = items.some((item) => item.id === focused) ? focused : (items[0]?.id ?? null);
  const elements = useRef(new Map<string, HTMLElement>());
  const moved = useRef(false);

  useEffect(() => {
    if (!moved.current || !current) return;
    moved.current = false;
    elements.current.get(current)?.focus();
  }, [current]);

  const setOpen = (path: string, open: boolean) => {
    const next = new Set(collapsed);
    if (open) next.delete(path);
    else next.add(path);
    setCollapsed(next);
  };
  const focus = (id: string | undefined) => {
    if (!id) return;
    moved.current = true;
    setFocused(id);
    if (id === current) elements.current.get(id)?.focus();
  };

  function onKeyDown(event: KeyboardEvent<HTMLUListElement>) {
    const at = items.findIndex((item) => item.id === current);
    if (at < 0) return;
    const item = items[at];
    const open = item.folder ? !collapsed.has(item.folder.path) : false;
    const hasChildren = Boolean(item.folder && (item.folder.children.length || item.folder.stacks.length));
    switch (event.key) {
      case "ArrowDown":
        focus(items[at + 1]?.id);
        break;
      case "ArrowUp":
        focus(items[at - 1]?.id);
        break;
      case "Home":
        focus(items[0]?.id);
        break;
      case "End":
        focus(items[items.length - 1]?.id);
        break;
      case "ArrowRight":
        if (item.folder && !open) setOpen(item.folder.path, true);
        else if (item.folder && hasChildren) focus(items[at + 1]?.id);
        break;
      case "ArrowLeft":
        if (item.folder && open && hasChildren) setOpen(item.folder.path, false);
        else if (item.parent) focus(item.parent);
        break;
      case "Enter":
        navigate(item.href);
        break;
      default:
        return;
    }
    event.preventDefault();
  }

  const itemProps = (id: string) => ({
    tabIndex: id === current ? 0 : -1,
    ref: (element: HTMLElement | null) => {
      if (element) elements.current.set(id, element);
      else elements.current.delete(id);
    },
    onFocus: (event: React.FocusEvent) => {
      if (event.target === event.currentTarget) setFocused(id);
    },
  });

  const renderStack = (stack: StackTreeItemFragment) => {
    const id = stackId(stack.slug);
    const last = stack.runs.nodes[0];
    return (
      <li key={stack.id} role="treeitem" data-stack={stack.slug} {...itemProps(id)}>
        <Link to={`/orgs/${org}/stacks/${stack.slug}`} className="tree-row stack-row" tabIndex={-1}>
          <span className="stack-icon" aria-hidden="true">
            ◆
          </span>
          <span className="tree-label">
            <span className="stack-name">
              {stack.name || stack.slug}
            </span>
            {stack.name && stack.name !== stack.slug && <span className="muted small mono">{stack.slug}</span>}
            <span className="muted small mono ellipsis repo">
              {stack.repository.replace(/^file:\/\//, "")} · {stack.branch}
              {stack.path && stack.path !== "." ? ` · ${stack.path}` : ""}
            </span>
          </span>
          <span className="stack-summary" data-testid="stack-summary">
            {summaryParts(stack.summary).map((part, at) => (
              <span key={part.text} className={`tone-text-${part.tone}`}>
                {at > 0 ? " · " : ""}
                {part.text}
              </span>
            ))}
          </span>
          {last ? (
            <span className="last-run" data-testid="last-run">
              <span className="muted small">latest</span>
              <StatusBadge status={last.status} />
              <TypeBadge type={last.type} />
              <span className="muted small">
                #{last.number} <TimeAgo iso={last.createdAt} />
              </span>
            </span>
          ) : (
            <span className="muted small">
              no runs yet
            </span>
          )}
        </Link>
      </li>
    );
  };

  const renderFolder = (node: FolderNode) => {
    const id = folderId(node.path);
    const open = !collapsed.has(node.path);
    const empty = node.children.length === 0 && node.stacks.length === 0;
    return (
      // The row is the tree item and owns its group (the WAI-ARIA navigation treeview's shape):
      // its name is the row's own words, not every stack inside it.
      <li key={node.path} role="none">
        <div
          role="treeitem"
          className="tree-row folder-row"
          aria-expanded={empty ? undefined : open}
          aria-owns={open && !empty ? `${id}-group` : undefined}
          data-folder={node.path}
          {...itemProps(id)}
        >
          <span className={`twisty ${empty ? "none" : ""}`} aria-hidden="true" onClick={() => !empty && setOpen(node.path, !open)}>
            {empty ? "" : open ? "▾" : "▸"}
          </span>
          <span className="folder-icon" aria-hidden="true">
            ▤
          </span>
          <Link to={`/orgs/${org}/folders/${node.path}`} className="folder-name" title="Folder settings and variables" tabIndex={-1}>
            {node.name}
          </Link>
          <span className="muted small">{node.stacks.length ? `${node.stacks.length} stack${node.stacks.length === 1 ? "" : "s"}` : ""}</span>
        </div>
        {open && !empty && (
          <ul role="group" id={`${id}-group`}>
            {node.children.map(renderFolder)}
            {node.stacks.map(renderStack)}
          </ul>
        )}
      </li>
    );
  };

  return (
    <ul className="tree" role="tree" aria-label="Folders and stacks" onKeyDown={onKeyDown}>
      {folders.map(renderFolder)}
      {rootStacks.map(renderStack)}
    </ul>
  );
}
