import { useMemo, useState, type FormEvent } from "react";
import { useNavigate, useParams } from "react-router";
import { useAction, useApiQuery, useMutate } from "../api/hooks";
import { useActiveRuns } from "../components/ActiveRuns";
import { FolderTree, type FolderNode } from "../components/FolderTree";
import { Card, Empty, ErrorBox, Loading, usePageTitle } from "../components/ui";
import {
  CreateFolderDocument,
  CreateStackDocument,
  StackTreeDocument,
  type StackTreeQuery,
} from "../graphql/generated";


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
  const { data, error, loading } = useApiQuery(StackTreeDocument, { org }, { refreshKey: version });
  const [creating, setCreating] = useState<"folder" | "stack" | null>(null);
  const tree = useMemo(() => buildTree(data?.organization?.folders ?? []), [data]);
  const organization = data?.organization;
  usePageTitle("Stacks", org);

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
      {organization && (
        <Card className="tree-card">
          {tree.length === 0 && organization.rootStacks.length === 0 ? (
            <Empty title="No stacks yet.">Create a folder to group stacks, or a stack from a Git repository.</Empty>
          ) : (
            <FolderTree org={org} folders={tree} rootStacks={organization.rootStacks} />
          )}
        </Card>
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
