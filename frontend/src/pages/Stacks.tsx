import { useMemo, useState, type FormEvent } from "react";
import { Link, useNavigate, useParams } from "react-router";
import { request } from "../api/client";
import { useAction, useQuery } from "../api/hooks";
import { useToken } from "../auth";
import { useActiveRuns } from "../components/ActiveRuns";
import { Card, Empty, ErrorBox, Loading, StatusBadge, TimeAgo, TypeBadge } from "../components/ui";
import {
  CreateFolderDocument,
  CreateStackDocument,
  StackTreeDocument,
  type StackTreeItemFragment,
  type StackTreeQuery,
} from "../graphql/generated";

type FolderNode = { path: string; name: string; stacks: StackTreeItemFragment[]; children: FolderNode[] };

/** Folders come as a flat list of paths: nest them by path. */
export function buildTree(folders: NonNullable<StackTreeQuery["organization"]>["folders"]): FolderNode[] {
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
  const { data, error, loading, refetch } = useQuery(StackTreeDocument, { org }, version);
  const [creating, setCreating] = useState<"folder" | "stack" | null>(null);
  const tree = useMemo(() => buildTree(data?.organization?.folders ?? []), [data]);
  const organization = data?.organization;

  return (
    <div className="page">
      <div className="page-head">
        <div>
          <h1>Stacks</h1>
          <p className="muted">Each stack is a directory of Terraform code in a Git repository.</p>
        </div>
        <div className="actions">
          <button className="btn" onClick={() => setCreating(creating === "folder" ? null : "folder")}>
            New folder
          </button>
          <button className="btn primary" onClick={() => setCreating(creating === "stack" ? null : "stack")}>
            New stack
          </button>
        </div>
      </div>
      {creating === "folder" && <CreateFolder org={org} onDone={() => { setCreating(null); void refetch(); }} />}
      {creating === "stack" && (
        <CreateStack org={org} folders={(organization?.folders ?? []).map((f) => f.path)} onCancel={() => setCreating(null)} />
      )}
      <ErrorBox error={error} />
      {!data && loading && <Loading what="stacks" />}
      {data && !organization && <Empty title={`There is no organization "${org}" that you are a member of.`} />}
      {organization && (
        <Card className="tree-card">
          {tree.length === 0 && organization.rootStacks.length === 0 ? (
            <Empty title="No stacks yet.">Create a folder to group stacks, or a stack from a Git repository.</Empty>
          ) : (
            <ul className="tree" role="tree" aria-label="Folders and stacks">
              {tree.map((node) => (
                <FolderItem key={node.path} org={org} node={node} />
              ))}
              {organization.rootStacks.map((stack) => (
                <StackItem key={stack.id} org={org} stack={stack} />
              ))}
            </ul>
          )}
        </Card>
      )}
    </div>
  );
}

function FolderItem({ org, node }: { org: string; node: FolderNode }) {
  const [open, setOpen] = useState(true);
  return (
    <li role="treeitem" aria-expanded={open} data-folder={node.path}>
      <div className="tree-row folder-row">
        <button className="twisty" onClick={() => setOpen(!open)} aria-label={open ? "Collapse" : "Expand"}>
          {open ? "▾" : "▸"}
        </button>
        <span className="folder-icon">▤</span>
        <Link to={`/orgs/${org}/folders/${node.path}`} className="folder-name" title="Folder settings and variables">
          {node.name}
        </Link>
        <span className="muted small">{node.stacks.length ? `${node.stacks.length} stack${node.stacks.length === 1 ? "" : "s"}` : ""}</span>
      </div>
      {open && (node.children.length > 0 || node.stacks.length > 0) && (
        <ul role="group">
          {node.children.map((child) => (
            <FolderItem key={child.path} org={org} node={child} />
          ))}
          {node.stacks.map((stack) => (
            <StackItem key={stack.id} org={org} stack={stack} />
          ))}
        </ul>
      )}
    </li>
  );
}

function StackItem({ org, stack }: { org: string; stack: StackTreeItemFragment }) {
  const last = stack.runs.nodes[0];
  return (
    <li role="treeitem" data-stack={stack.slug}>
      <Link to={`/orgs/${org}/stacks/${stack.slug}`} className="tree-row stack-row">
        <span className="stack-icon">◆</span>
        <span className="stack-name">{stack.name || stack.slug}</span>
        {stack.name && stack.name !== stack.slug && <span className="muted small mono">{stack.slug}</span>}
        <span className="muted small mono ellipsis">
          {stack.repository.replace(/^file:\/\//, "")} · {stack.branch}
          {stack.path && stack.path !== "." ? ` · ${stack.path}` : ""}
        </span>
        <span className="spacer" />
        {last ? (
          <span className="last-run" data-testid="last-run">
            <StatusBadge status={last.status} />
            <TypeBadge type={last.type} />
            <span className="muted small">
              #{last.number} <TimeAgo iso={last.createdAt} />
            </span>
          </span>
        ) : (
          <span className="muted small">no runs yet</span>
        )}
      </Link>
    </li>
  );
}

function CreateFolder({ org, onDone }: { org: string; onDone: () => void }) {
  const token = useToken();
  const [path, setPath] = useState("");
  const { busy, error, run } = useAction();

  function submit(event: FormEvent) {
    event.preventDefault();
    void run(async () => {
      const { createFolder } = await request(CreateFolderDocument, { org, path: path.trim() }, token);
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
  const token = useToken();
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
      const { createStack } = await request(
        CreateStackDocument,
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
        },
        token,
      );
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
