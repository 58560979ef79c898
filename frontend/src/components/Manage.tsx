import { useState, type FormEvent } from "react";
import { useNavigate } from "react-router";
import { useAction, useMutate } from "../api/hooks";
import { DeleteFolderDocument, DeleteStackDocument, ManageStackDocument, MoveFolderDocument, type GitAuth } from "../graphql/generated";
import { ConfirmDelete, Saved } from "./Confirm";
import { Card, ErrorBox } from "./ui";

type StackFacts = {
  slug: string;
  name: string;
  folder: string | null;
  gitAuth: GitAuth | null | undefined;
  repository: string;
  branch: string;
  path: string;
};

const CREDENTIAL: Record<GitAuth, string> = { HTTPS_TOKEN: "an HTTPS token", SSH_KEY: "an SSH key" };

/** A stack's rename, move, source, Git credentials and deletion (admins; the server checks). */
export function ManageStack({ org, stack, onSaved }: { org: string; stack: StackFacts; onSaved?: () => void }) {
  const mutate = useMutate();
  const navigate = useNavigate();
  const [form, setForm] = useState({ slug: stack.slug, name: stack.name, folder: stack.folder ?? "" });
  const [secret, setSecret] = useState({ kind: "gitHttpsToken" as "gitHttpsToken" | "gitSshKey", value: "" });
  const [force, setForce] = useState(false);
  const rename = useAction();
  const credentials = useAction();
  const removal = useAction();
  const source = useAction();
  const [code, setCode] = useState({ repository: stack.repository, branch: stack.branch, path: stack.path });

  function saveSource(event: FormEvent) {
    event.preventDefault();
    void source.run(async () => {
      const input: Record<string, string> = {};
      if (code.repository.trim() !== stack.repository) input.repository = code.repository.trim();
      if (code.branch.trim() !== stack.branch) input.branch = code.branch.trim();
      if (code.path.trim() !== stack.path) input.path = code.path.trim();
      if (Object.keys(input).length === 0) return "Nothing to save: change the repository, the branch or the path first.";
      const { updateStack } = await mutate(ManageStackDocument, { org, stack: stack.slug, input });
      if (updateStack.__typename !== "Stack") return updateStack.message;
      onSaved?.();
    });
  }

  function save(event: FormEvent) {
    event.preventDefault();
    void rename.run(async () => {
      const input: Record<string, string | null> = {};
      if (form.slug.trim() !== stack.slug) input.slug = form.slug.trim();
      if (form.name.trim() !== stack.name) input.name = form.name.trim();
      if (form.folder.trim() !== (stack.folder ?? "")) input.folder = form.folder.trim() || null;
      if (Object.keys(input).length === 0) return "Nothing to save: change the slug, the name or the folder first.";
      const { updateStack } = await mutate(ManageStackDocument, { org, stack: stack.slug, input });
      if (updateStack.__typename !== "Stack") return updateStack.message;
      navigate(`/orgs/${org}/stacks/${updateStack.slug}/settings`, { replace: true });
    });
  }

  function setCredential(value: string | null) {
    void credentials.run(async () => {
      const input = value === null ? { gitHttpsToken: null, gitSshKey: null } : { [secret.kind]: value };
      const { updateStack } = await mutate(ManageStackDocument, { org, stack: stack.slug, input });
      if (updateStack.__typename !== "Stack") return updateStack.message;
      setSecret({ ...secret, value: "" });
    });
  }

  function remove() {
    void removal.run(async () => {
      const { deleteStack } = await mutate(DeleteStackDocument, { org, stack: stack.slug, force });
      if (deleteStack.__typename !== "DeletedStack") return deleteStack.message;
      navigate(`/orgs/${org}/stacks`);
    });
  }

  return (
    <Card title="Manage this stack" className="manage">
      <form className="form-grid" onSubmit={save} aria-label="Rename or move the stack">
        <label>
          Slug
          <input value={form.slug} onChange={(e) => setForm({ ...form, slug: e.target.value })} required />
          <span className="hint">Renaming changes its address; the old one stops working.</span>
        </label>
        <label>
          Name
          <input value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} required />
        </label>
        <label className="wide">
          Folder <span className="muted">(empty: top level)</span>
          <input value={form.folder} onChange={(e) => setForm({ ...form, folder: e.target.value })} placeholder="prod/eu" />
        </label>
        <div className="wide form-actions">
          <button className="btn primary" type="submit" disabled={rename.busy}>
            Save name and place
          </button>
        </div>
      </form>
      <ErrorBox error={rename.error} title="The stack was not changed." />

      <form className="form-grid" onSubmit={saveSource} aria-label="Repository, branch and path">
        <label className="wide">
          Repository
          <input value={code.repository} onChange={(e) => { source.reset(); setCode({ ...code, repository: e.target.value }); }} required />
          <span className="hint">Any URL Git understands. The next run checks out the new place; runs already started keep theirs.</span>
        </label>
        <label>
          Branch
          <input value={code.branch} onChange={(e) => { source.reset(); setCode({ ...code, branch: e.target.value }); }} required />
        </label>
        <label>
          Path <span className="muted">(empty: the repository's root)</span>
          <input value={code.path} onChange={(e) => { source.reset(); setCode({ ...code, path: e.target.value }); }} />
        </label>
        <div className="wide form-actions">
          <button className="btn primary" type="submit" disabled={source.busy}>
            Save repository, branch and path
          </button>
          <Saved show={source.done} />
        </div>
      </form>
      <ErrorBox error={source.error} title="The source was not changed." />

      <form
        className="form-row"
        aria-label="Git credentials"
        onSubmit={(e) => {
          e.preventDefault();
          setCredential(secret.value);
        }}
      >
        <label>
          Credential
          <select value={secret.kind} onChange={(e) => setSecret({ ...secret, kind: e.target.value as typeof secret.kind })}>
            <option value="gitHttpsToken">HTTPS token</option>
            <option value="gitSshKey">SSH private key</option>
          </select>
        </label>
        <label className="grow">
          New value <span className="muted">(write-only)</span>
          <input type="password" autoComplete="off" value={secret.value} onChange={(e) => setSecret({ ...secret, value: e.target.value })} required />
          <span className="hint" data-testid="git-auth">
            {stack.gitAuth ? `The stack has ${CREDENTIAL[stack.gitAuth]}; a new one replaces it.` : "The stack has no Git credential."}
          </span>
        </label>
        <button className="btn" type="submit" disabled={credentials.busy}>
          Replace credential
        </button>
        {stack.gitAuth && (
          <button className="btn danger-outline" type="button" disabled={credentials.busy} onClick={() => setCredential(null)}>
            Remove credential
          </button>
        )}
      </form>
      <ErrorBox error={credentials.error} title="The credentials were not changed." />

      <ConfirmDelete
        what="stack"
        name={stack.slug}
        busy={removal.busy}
        error={removal.error}
        onDelete={remove}
        onKeep={() => setForce(false)}
        question={
          <>
            <strong>Delete stack “{stack.slug}”?</strong> It disappears at once; its runs, state versions and audit entries are kept
            for the retention period, readable by admins.
            <label className="inline">
              <input type="checkbox" checked={force} onChange={(e) => setForce(e.target.checked)} /> Force: end its waiting runs
              and leave any resources in its state unmanaged
            </label>
          </>
        }
      />
    </Card>
  );
}

/** A folder's rename or move, and its deletion when empty (admins; the server checks). */
export function ManageFolder({ org, path }: { org: string; path: string }) {
  const mutate = useMutate();
  const navigate = useNavigate();
  const [newPath, setNewPath] = useState(path);
  const move = useAction();
  const removal = useAction();

  function save(event: FormEvent) {
    event.preventDefault();
    void move.run(async () => {
      const { moveFolder } = await mutate(MoveFolderDocument, { org, path, newPath: newPath.trim().replace(/^\/+|\/+$/g, "") });
      if (moveFolder.__typename !== "Folder") return moveFolder.message;
      navigate(`/orgs/${org}/folders/${moveFolder.path}`, { replace: true });
    });
  }

  function remove() {
    void removal.run(async () => {
      const { deleteFolder } = await mutate(DeleteFolderDocument, { org, path });
      if (deleteFolder.__typename !== "DeletedFolder") return deleteFolder.message;
      navigate(`/orgs/${org}/stacks`);
    });
  }

  return (
    <Card title="Manage this folder" className="manage">
      <form className="form-row" onSubmit={save} aria-label="Rename or move the folder">
        <label className="grow">
          New path
          <input value={newPath} onChange={(e) => setNewPath(e.target.value)} required />
          <span className="hint">A new last segment renames it, a new parent moves it with its subfolders and stacks.</span>
        </label>
        <button className="btn primary" type="submit" disabled={move.busy}>
          Rename or move
        </button>
      </form>
      <ErrorBox error={move.error} title="The folder was not changed." />
      <ConfirmDelete
        what="folder"
        name={path}
        busy={removal.busy}
        error={removal.error}
        onDelete={remove}
        question={
          <>
            <strong>Delete folder “{path}”?</strong> Only an empty folder can be deleted; its settings and variables go with it.
          </>
        }
      />
    </Card>
  );
}
