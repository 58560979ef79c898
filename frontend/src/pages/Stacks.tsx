import { useMemo, useState, type FormEvent } from "react";
import { useNavigate, useParams, useSearchParams } from "react-router";
import { useAction, useApiQuery, useMutate } from "../api/hooks";
import { useActiveRuns } from "../components/ActiveRuns";
import { FolderTree, type FolderNode } from "../components/FolderTree";
import { Card, Empty, ErrorBox, Loading, useOrgPageTitle } from "../components/ui";
import { hasStatus, STACK_STATUSES, type StackStatusKey } from "../data/stackSummary";
import {
  CreateFolderDocument,
  CreateStackDocument,
  StackTreeDocument,
  type StackTreeItemFragment,
  type StackTreeQuery,
} from "../graphql/generated";

type Folders = NonNullable<StackTreeQuery["organization"]>["folders"];
const TRIGGERS = [
  { key: "MANUAL", label: "Manual only" },
  { key: "PLAN", label: "A push plans" },
  { key: "APPLY", label: "A push applies" },
] as const;
/** The folder filter's value for the stacks in no folder. */
const TOP_LEVEL = "/";

/** The list's search and filters, as the address keeps them (?q=net&status=drifted&folder=prod&trigger=apply). */
type StackFilters = { q: string; status: string; folder: string; trigger: string };
const FILTER_NAMES = ["q", "status", "folder", "trigger"] as const;

function readFilters(params: URLSearchParams): StackFilters {
  return { q: params.get("q") ?? "", status: params.get("status") ?? "", folder: params.get("folder") ?? "", trigger: params.get("trigger") ?? "" };
}

/** Whether a stack in `folder` (null: none) passes the filters. */
function matches(stack: StackTreeItemFragment, folder: string | null, filters: StackFilters): boolean {
  const q = filters.q.trim().toLowerCase();
  if (q && !stack.slug.toLowerCase().includes(q) && !stack.name.toLowerCase().includes(q)) return false;
  if (filters.status && !hasStatus(stack.summary, filters.status as StackStatusKey)) return false;
  if (filters.trigger && stack.trigger !== filters.trigger.toUpperCase()) return false;
  if (filters.folder === TOP_LEVEL) return folder === null;
  if (filters.folder && !(folder === filters.folder || folder?.startsWith(`${filters.folder}/`))) return false;
  return true;
}

/** Folders whose stacks (here or below) pass the filters, each with only those stacks. */
function prune(nodes: FolderNode[]): FolderNode[] {
  return nodes
    .map((node) => ({ ...node, children: prune(node.children) }))
    .filter((node) => node.stacks.length > 0 || node.children.length > 0);
}


/** Folders come as a flat list of paths: nest them by path. */
export function buildTree(folders: Folders): FolderNode[] {
  const nodes = new Map<string, FolderNode>();
  const sorted = [...folders].sort((a, b) => a.path.localeCompare(b.path));
  for (const folder of sorted) nodes.set(folder.path, { path: folder.path, name: folder.name, stacks: folder.stacks, children: [] });
  const roots: FolderNode[] = [];
  for (const node of nodes.values()) {
    const parent = node.path.includes("/") ? nodes.get(node.path.slice(0, node.path.lastIndexOf("/"))) : undefined;
    (parent ? parent.children : roots).push(node);
  }
  return roots;
}

export function StacksPage() {
  const { org = "" } = useParams();
  const { version } = useActiveRuns();
  const { data, error, loading } = useApiQuery(StackTreeDocument, { org }, { refreshKey: version });
  const [creating, setCreating] = useState<"folder" | "stack" | null>(null);
  const [params, setParams] = useSearchParams();
  const filters = readFilters(params);
  const filtering = FILTER_NAMES.some((name) => filters[name]);
  const organization = data?.organization;
  const { tree, rootStacks, shown, total } = useMemo(() => {
    const folders = organization?.folders ?? [];
    const roots = organization?.rootStacks ?? [];
    const total = roots.length + folders.reduce((n, f) => n + f.stacks.length, 0);
    if (!filtering) return { tree: buildTree(folders), rootStacks: roots, shown: total, total };
    const kept = folders.map((f) => ({ ...f, stacks: f.stacks.filter((s) => matches(s, f.path, filters)) }));
    const keptRoots = roots.filter((s) => matches(s, null, filters));
    const shown = keptRoots.length + kept.reduce((n, f) => n + f.stacks.length, 0);
    return { tree: prune(buildTree(kept)), rootStacks: keptRoots, shown, total };
    // `filters` is read from `params` each render: the address is what changes.
  }, [organization, filtering, params]);
  const setFilter = (name: keyof StackFilters, value: string) => {
    // From the address as it is now (see Stack.tsx's history filters): two quick changes both stay.
    const next = new URLSearchParams(window.location.search);
    if (value) next.set(name, value);
    else next.delete(name);
    setParams(next, { replace: true });
  };
  useOrgPageTitle("Stacks");

  return (
    <div className="page">
      <div className="page-head">
        <div>
          <h1>Stacks</h1>
          <p className="muted">Each stack is a directory of Terraform code in a Git repository.</p>
        </div>
        {/* Only for those the server says may create them (admins). */}
        <div className="actions">
          {organization?.viewerCan.createFolder && (
            <button className="btn" onClick={() => setCreating(creating === "folder" ? null : "folder")}>
              New folder
            </button>
          )}
          {organization?.viewerCan.createStack && (
            <button className="btn primary" onClick={() => setCreating(creating === "stack" ? null : "stack")}>
              New stack
            </button>
          )}
        </div>
      </div>
      {creating === "folder" && <CreateFolder org={org} onDone={() => setCreating(null)} />}
      {creating === "stack" && (
        <CreateStack org={org} folders={(organization?.folders ?? []).map((f) => f.path)} onCancel={() => setCreating(null)} />
      )}
      <ErrorBox error={error} />
      {!data && loading && <Loading what="stacks" />}
      {organization && (total > 0 || filtering) && (
        <StackFiltersBar filters={filters} folders={organization.folders.map((f) => f.path)} onChange={setFilter} shown={filtering ? shown : null} total={total} />
      )}
      {organization && (
        <Card className="tree-card">
          {tree.length === 0 && rootStacks.length === 0 ? (
            filtering ? (
              <Empty title="No stack matches these filters.">Clear a filter or the search to see more stacks.</Empty>
            ) : (
              <Empty title="No stacks yet.">Create a folder to group stacks, or a stack from a Git repository.</Empty>
            )
          ) : (
            <FolderTree org={org} folders={tree} rootStacks={rootStacks} />
          )}
        </Card>
      )}
    </div>
  );
}

function StackFiltersBar({
  filters,
  folders,
  onChange,
  shown,
  total,
}: {
  filters: StackFilters;
  folders: string[];
  onChange: (name: keyof StackFilters, value: string) => void;
  /** How many stacks pass, while filtering. */
  shown: number | null;
  total: number;
}) {
  return (
    <div className="filters stack-filters" role="search" aria-label="Find stacks">
      <input type="search" aria-label="Search stacks by name" placeholder="Search by name" value={filters.q} onChange={(e) => onChange("q", e.target.value)} />
      <select aria-label="Filter stacks by status" value={filters.status} onChange={(e) => onChange("status", e.target.value)}>
        <option value="">Any status</option>
        {STACK_STATUSES.map((s) => (
          <option key={s.key} value={s.key}>
            {s.label}
          </option>
        ))}
      </select>
      <select aria-label="Filter stacks by folder" value={filters.folder} onChange={(e) => onChange("folder", e.target.value)}>
        <option value="">Any folder</option>
        <option value={TOP_LEVEL}>In no folder</option>
        {[...folders].sort().map((path) => (
          <option key={path} value={path}>
            {path}
          </option>
        ))}
      </select>
      <select aria-label="Filter stacks by trigger" value={filters.trigger} onChange={(e) => onChange("trigger", e.target.value)}>
        <option value="">Any trigger</option>
        {TRIGGERS.map((t) => (
          <option key={t.key} value={t.key.toLowerCase()}>
            {t.label}
          </option>
        ))}
      </select>
      {shown !== null && (
        <span className="small muted" role="status" data-testid="stack-matches">
          {shown.toLocaleString()} of {total.toLocaleString()} {total === 1 ? "stack" : "stacks"}
        </span>
      )}
    </div>
  );
}

function CreateFolder({ org, onDone }: { org: string; onDone: () => void }) {
  const mutate = useMutate();
  const [path, setPath] = useState("");
  const { busy, error, run } = useAction();

  function submit(event: FormEvent) {
    event.preventDefault();
    void run(async () => {
      const { createFolder } = await mutate(CreateFolderDocument, { org, path: path.trim() });
      if (createFolder.__typename !== "Folder") return createFolder.message;
      onDone();
    });
  }

  return (
    <Card title="New folder">
      <form className="form-row" onSubmit={submit}>
        <label className="grow">
          Path
          <input value={path} onChange={(e) => setPath(e.target.value)} placeholder="prod/eu" autoFocus required />
          <span className="hint">Slashes nest folders; missing parents are created.</span>
        </label>
        <button className="btn primary" type="submit" disabled={busy}>
          Create folder
        </button>
      </form>
      <ErrorBox error={error} />
    </Card>
  );
}

function CreateStack({ org, folders, onCancel }: { org: string; folders: string[]; onCancel: () => void }) {
  const mutate = useMutate();
  const navigate = useNavigate();
  const [form, setForm] = useState({ slug: "", name: "", repository: "", branch: "", path: "", folder: "", gitHttpsToken: "" });
  const { busy, error, run } = useAction();
  const field = (key: keyof typeof form) => ({
    value: form[key],
    onChange: (e: { target: { value: string } }) => setForm({ ...form, [key]: e.target.value }),
  });

  function submit(event: FormEvent) {
    event.preventDefault();
    const optional = (value: string) => value.trim() || null;
    void run(async () => {
      const { createStack } = await mutate(CreateStackDocument,
        {
          org,
          input: {
            slug: form.slug.trim(),
            repository: form.repository.trim(),
            name: optional(form.name),
            branch: optional(form.branch),
            path: optional(form.path),
            folder: optional(form.folder),
            gitHttpsToken: optional(form.gitHttpsToken),
          },
        });
      if (createStack.__typename !== "Stack") return createStack.message;
      navigate(`/orgs/${org}/stacks/${createStack.slug}`);
    });
  }

  return (
    <Card title="New stack">
      <form className="form-grid" onSubmit={submit}>
        <label>
          Slug
          <input {...field("slug")} placeholder="network" required autoFocus />
          <span className="hint">Unique in the organization; used in URLs and the API.</span>
        </label>
        <label>
          Name <span className="muted">(optional)</span>
          <input {...field("name")} placeholder="Network" />
        </label>
        <label className="wide">
          Repository
          <input {...field("repository")} placeholder="https://github.com/acme/infra.git" required />
          <span className="hint">Any URL git understands, including file:///… for a local repository.</span>
        </label>
        <label>
          Branch <span className="muted">(default main)</span>
          <input {...field("branch")} placeholder="main" />
        </label>
        <label>
          Path <span className="muted">(optional)</span>
          <input {...field("path")} placeholder="infra/network" />
        </label>
        <label>
          Folder <span className="muted">(optional)</span>
          <input {...field("folder")} list="folder-paths" placeholder="prod/eu" />
          <datalist id="folder-paths">
            {folders.map((f) => (
              <option key={f} value={f} />
            ))}
          </datalist>
        </label>
        <label>
          HTTPS token <span className="muted">(optional, write-only)</span>
          <input {...field("gitHttpsToken")} type="password" autoComplete="off" />
        </label>
        <div className="wide form-actions">
          <button className="btn" type="button" onClick={onCancel}>
            Cancel
          </button>
          <button className="btn primary" type="submit" disabled={busy}>
            Create stack
          </button>
        </div>
      </form>
      <ErrorBox error={error} />
    </Card>
  );
}
