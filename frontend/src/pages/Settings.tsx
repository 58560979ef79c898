import { useState, type FormEvent } from "react";
import { Link, useParams } from "react-router";
import { useAction, useApiQuery, useMutate } from "../api/hooks";
import { ManageFolder, ManageStack } from "../components/Manage";
import { Card, Empty, ErrorBox, Loading, NotFoundPage, TimeAgo, usePageTitle } from "../components/ui";
import { originLabel } from "../format";
import {
  DeleteVariableDocument,
  FolderLevelDocument,
  OrgLevelDocument,
  SetVariableDocument,
  StackLevelDocument,
  UpdateSettingsDocument,
  type JsonValue,
  type SettingsViewFragment,
  type VariableKind,
  type VariableViewFragment,
} from "../graphql/generated";
import { StackHeader } from "./Stack";

/** Where settings and variables are set: the organization, a folder (by path) or a stack. */
type Level = { folder?: string; stack?: string };

type Inherited = VariableViewFragment & { origin: string };

/** Folder paths from the outermost to `path` itself: "a/b" → ["a", "a/b"]. */
function chain(path: string | null | undefined): string[] {
  if (!path) return [];
  const parts = path.split("/");
  return parts.map((_, i) => parts.slice(0, i + 1).join("/"));
}

/** What a level inherits: for each variable it does not set, the nearest outer level's. */
function inherited(
  orgVariables: VariableViewFragment[],
  folders: { path: string; variables: VariableViewFragment[] }[],
  outerFolders: string[],
  own: VariableViewFragment[],
): Inherited[] {
  const byKey = new Map<string, Inherited>();
  const key = (v: VariableViewFragment) => `${v.kind}:${v.name}`;
  for (const v of orgVariables) byKey.set(key(v), { ...v, origin: "organization" });
  for (const path of outerFolders) {
    for (const v of folders.find((f) => f.path === path)?.variables ?? []) byKey.set(key(v), { ...v, origin: `folder:${path}` });
  }
  for (const v of own) byKey.delete(key(v));
  return [...byKey.values()].sort((a, b) => a.name.localeCompare(b.name));
}

export function OrgSettingsPage() {
  const { org = "" } = useParams();
  const { data, error, loading } = useApiQuery(OrgLevelDocument, { org });
  const organization = data?.organization;
  usePageTitle("Settings", org);
  if (!data && loading) return <Loading what="settings" />;
  if (!organization) return <ErrorBox error={error ?? `There is no organization "${org}" that you are a member of.`} />;
  return (
    <div className="page">
      <div className="page-head">
        <div>
          <h1>Organization settings</h1>
          <p className="muted">Folders and stacks inherit these unless they set their own.</p>
        </div>
      </div>
      <SettingsCard org={org} level={{}} settings={organization.settings} />
      <VariablesCard org={org} level={{}} own={organization.variables} inherited={[]} />
    </div>
  );
}

export function FolderSettingsPage() {
  const { org = "", "*": path = "" } = useParams();
  const { data, error, loading } = useApiQuery(FolderLevelDocument, { org, path });
  const folder = data?.organization?.folder;
  usePageTitle(path, "Folder settings");
  if (!data && loading) return <Loading what="the folder" />;
  if (!data?.organization || !folder) {
    return (
      <>
        <ErrorBox error={error} />
        <Empty title={`There is no folder "${path}".`}>
          <Link to={`/orgs/${org}/stacks`}>All stacks</Link>
        </Empty>
      </>
    );
  }
  const outer = chain(folder.path).slice(0, -1);
  return (
    <div className="page">
      <div className="page-head">
        <div>
          <nav className="crumbs">
            <Link to={`/orgs/${org}/stacks`}>Stacks</Link>
            {outer.map((p) => (
              <span key={p}>
                <span>/</span> <Link to={`/orgs/${org}/folders/${p}`}>{p.split("/").pop()}</Link>
              </span>
            ))}
          </nav>
          <h1>
            <span className="folder-icon">▤</span> {folder.path}
          </h1>
          <p className="muted">
            {folder.stacks.length
              ? `Stacks here: ${folder.stacks.map((s) => s.slug).join(", ")}.`
              : "No stacks directly in this folder."}{" "}
            {folder.children.length > 0 && `Subfolders: ${folder.children.map((c) => c.name).join(", ")}.`}
          </p>
        </div>
      </div>
      <SettingsCard org={org} level={{ folder: folder.path }} settings={folder.settings} />
      <VariablesCard
        org={org}
        level={{ folder: folder.path }}
        own={folder.variables}
        inherited={inherited(data.organization.variables, data.organization.folders, outer, folder.variables)}
      />
      {data.organization.viewerRole === "admin" && <ManageFolder key={folder.path} org={org} path={folder.path} />}
    </div>
  );
}

export function StackSettingsPage() {
  const { org = "", slug = "" } = useParams();
  const { data, error, loading } = useApiQuery(StackLevelDocument, { org, slug });
  const stack = data?.organization?.stack;
  usePageTitle("Settings", slug);
  if (!data && loading) return <Loading what="the stack's settings" />;
  if (!data?.organization || !stack) {
    return error ? <ErrorBox error={error} /> : <NotFoundPage title={`There is no stack “${slug}” here.`} back={`/orgs/${org}/stacks`} backLabel="All stacks" />;
  }
  return (
    <div className="page">
      <StackHeader org={org} slug={slug} folder={stack.folder?.path} title={stack.slug} />
      <SettingsCard org={org} level={{ stack: slug }} settings={stack.settings} />
      <VariablesCard
        org={org}
        level={{ stack: slug }}
        own={stack.variables}
        inherited={inherited(data.organization.variables, data.organization.folders, chain(stack.folder?.path), stack.variables)}
      />
      {data.organization.viewerRole === "admin" && (
        <ManageStack
          key={`${stack.slug}|${stack.folder?.path ?? ""}|${stack.name}`}
          org={org}
          stack={{ slug: stack.slug, name: stack.name, folder: stack.folder?.path ?? null, gitAuth: stack.gitAuth }}
        />
      )}
    </div>
  );
}

// Settings -----------------------------------------------------------------------------------

const SETTINGS = [
  {
    key: "requireApproval",
    name: "require_approval",
    title: "Require approval",
    help: "An apply waits for someone to approve its plan. Read when the plan finishes. Default: on.",
  },
  {
    key: "confirmDestructive",
    name: "confirm_destructive",
    title: "Confirm destructive changes",
    help: "Approving needs a tick for every resource that will be deleted or replaced. Default: off.",
  },
  {
    key: "forbidSelfApproval",
    name: "forbid_self_approval",
    title: "Forbid self-approval",
    help: "The person who started a run, or the author of the pushed commit, may not approve it. Default: off.",
  },
] as const;

function SettingsCard({ org, level, settings }: { org: string; level: Level; settings: SettingsViewFragment }) {
  const mutate = useMutate();
  const { busy, error, run } = useAction();
  const here = level.stack ? "this stack" : level.folder ? "this folder" : "the organization";

  const set = (key: "requireApproval" | "confirmDestructive" | "forbidSelfApproval" | "approvers" | "policies", value: boolean | string[] | null) =>
    run(async () => {
      const { updateSettings } = await mutate(UpdateSettingsDocument,
        { org, input: { [key]: value }, folder: level.folder ?? null, stack: level.stack ?? null });
      if (updateSettings.__typename !== "Settings") return updateSettings.message;
    });

  return (
    <Card title="Approval rules">
      <div className="settings">
        {SETTINGS.map((s) => {
          const explicit = settings.explicit[s.key];
          const effective = settings.effective[s.key];
          const inheritedFrom = explicit === null ? originLabel(effective.origin) : null;
          return (
            <div className="setting" key={s.key} data-setting={s.name}>
              <div className="setting-text">
                <div className="setting-title">
                  {s.title} <code>{s.name}</code>
                </div>
                <div className="muted small">{s.help}</div>
                <div className="effective" data-testid="effective">
                  Effective here: <strong>{effective.value ? "on" : "off"}</strong>{" "}
                  <span className="muted">
                    {explicit === null ? `inherited from ${inheritedFrom}` : `set on ${here}`}
                  </span>
                </div>
              </div>
              <div className="segmented" role="radiogroup" aria-label={s.name}>
                {[
                  { value: null, label: level.folder || level.stack ? "Inherit" : "Default" },
                  { value: true, label: "On" },
                  { value: false, label: "Off" },
                ].map((option) => (
                  <button
                    key={String(option.value)}
                    role="radio"
                    aria-checked={explicit === option.value}
                    className={explicit === option.value ? "on" : ""}
                    disabled={busy}
                    onClick={() => explicit !== option.value && void set(s.key, option.value)}
                  >
                    {option.label}
                  </button>
                ))}
              </div>
            </div>
          );
        })}
        <ApproversSetting
          explicit={settings.explicit.approvers ?? null}
          effective={settings.effective.approvers}
          here={here}
          inherits={Boolean(level.folder || level.stack)}
          busy={busy}
          onSave={(value) => void set("approvers", value)}
        />
        <PoliciesSetting
          explicit={settings.explicit.policies ?? null}
          effective={settings.effective.policies}
          here={here}
          inherits={Boolean(level.folder || level.stack)}
          busy={busy}
          onSave={(value) => void set("policies", value)}
        />
      </div>
      <ErrorBox error={error} />
    </Card>
  );
}

/** approvers: "user:<email>" and "group:<name>" entries, or null (any operator or admin). */
function ApproversSetting({
  explicit,
  effective,
  here,
  inherits,
  busy,
  onSave,
}: {
  explicit: string[] | null;
  effective: { value?: string[] | null; origin: string };
  here: string;
  inherits: boolean;
  busy: boolean;
  onSave: (value: string[] | null) => void;
}) {
  const [text, setText] = useState((explicit ?? []).join(", "));
  const entries = text
    .split(",")
    .map((e) => e.trim())
    .filter(Boolean);
  const shown = effective.value ? effective.value.join(", ") || "nobody" : "any operator or admin";
  return (
    <div className="setting" data-setting="approvers">
      <div className="setting-text">
        <div className="setting-title">
          Approvers <code>approvers</code>
        </div>
        <div className="muted small">
          Who may approve or discard: <code>user:&lt;email&gt;</code> and <code>group:&lt;name&gt;</code> entries (groups are set on the
          Members page). Empty: any operator or admin.
        </div>
        <div className="effective" data-testid="effective">
          Effective here: <strong>{shown}</strong>{" "}
          <span className="muted">{explicit === null ? `inherited from ${originLabel(effective.origin)}` : `set on ${here}`}</span>
        </div>
      </div>
      <form
        className="approvers-form"
        onSubmit={(e) => {
          e.preventDefault();
          onSave(entries.length ? entries : null);
        }}
      >
        <input aria-label="approvers" placeholder="group:sre, user:ada@example.com" value={text} onChange={(e) => setText(e.target.value)} />
        <button className="btn small" type="submit" disabled={busy}>
          Save
        </button>
        {explicit !== null && (
          <button
            className="btn small ghost"
            type="button"
            disabled={busy}
            onClick={() => {
              setText("");
              onSave(null);
            }}
          >
            {inherits ? "Inherit" : "Default"}
          </button>
        )}
      </form>
    </div>
  );
}

/** policies: names of the organization's policies evaluated when each plan ends, or null (none,
 * or inherit); an empty list turns them off at this level. */
function PoliciesSetting({
  explicit,
  effective,
  here,
  inherits,
  busy,
  onSave,
}: {
  explicit: string[] | null;
  effective: { value?: string[] | null; origin: string };
  here: string;
  inherits: boolean;
  busy: boolean;
  onSave: (value: string[] | null) => void;
}) {
  const [text, setText] = useState((explicit ?? []).join(", "));
  const entries = text
    .split(",")
    .map((e) => e.trim())
    .filter(Boolean);
  const shown = effective.value && effective.value.length ? effective.value.join(", ") : "none";
  return (
    <div className="setting" data-setting="policies">
      <div className="setting-text">
        <div className="setting-title">
          Policies <code>policies</code>
        </div>
        <div className="muted small">
          Names of the organization&apos;s policies (the Policies page) evaluated when each plan ends. A deny fails the run; approval policies add
          to the approval rules.
        </div>
        <div className="effective" data-testid="effective">
          Effective here: <strong>{shown}</strong>{" "}
          <span className="muted">{explicit === null ? `inherited from ${originLabel(effective.origin)}` : `set on ${here}`}</span>
        </div>
      </div>
      <form
        className="approvers-form"
        onSubmit={(e) => {
          e.preventDefault();
          onSave(entries);
        }}
      >
        <input aria-label="policies" placeholder="protect, dba" value={text} onChange={(e) => setText(e.target.value)} />
        <button className="btn small" type="submit" disabled={busy}>
          Save
        </button>
        {explicit !== null && (
          <button
            className="btn small ghost"
            type="button"
            disabled={busy}
            onClick={() => {
              setText("");
              onSave(null);
            }}
          >
            {inherits ? "Inherit" : "Default"}
          </button>
        )}
      </form>
    </div>
  );
}

// Variables ----------------------------------------------------------------------------------

function VariablesCard({
  org,
  level,
  own,
  inherited,
}: {
  org: string;
  level: Level;
  own: VariableViewFragment[];
  inherited: Inherited[];
}) {
  const mutate = useMutate();
  const [form, setForm] = useState({ name: "", value: "", kind: "TERRAFORM" as VariableKind, sensitive: false, json: false });
  const { busy, error, setError, run } = useAction();
  const scope = { folder: level.folder ?? null, stack: level.stack ?? null };

  function save(event: FormEvent) {
    event.preventDefault();
    let value: JsonValue = form.value;
    if (form.json) {
      try {
        value = JSON.parse(form.value) as JsonValue;
      } catch {
        setError("The value is not valid JSON. Untick “JSON value” to send it as a string.");
        return;
      }
    }
    void run(async () => {
      const { setVariable } = await mutate(SetVariableDocument,
        { org, name: form.name.trim(), value, sensitive: form.sensitive, kind: form.kind, ...scope });
      if (setVariable.__typename !== "Variable") return setVariable.message;
      setForm({ ...form, name: "", value: "" });
    });
  }

  const remove = (name: string) =>
    run(async () => {
      const { deleteVariable } = await mutate(DeleteVariableDocument, { org, name, ...scope });
      if (deleteVariable.__typename !== "DeletedVariable") return deleteVariable.message;
    });

  return (
    <Card title="Variables">
      <p className="muted small pad">
        The nearest level wins: stack, then folders (innermost first), then the organization; <code>config.yaml</code> in the
        commit is the outermost. Sensitive values are write-only: nobody can read them back, here or in the API.
      </p>
      {own.length === 0 && inherited.length === 0 ? (
        <Empty title="No variables at this level." />
      ) : (
        <table className="table variables responsive" data-testid="variables">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Value</th>
              <th scope="col">Kind</th>
              <th scope="col">Set on</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {own.map((v) => (
              <tr key={`${v.kind}:${v.name}`} data-variable={v.name}>
                <td className="mono" data-label="Name">{v.name}</td>
                <td className="mono value-cell" data-label="Value">{v.sensitive ? <span className="sensitive">hidden (write-only)</span> : shownValue(v.value)}</td>
                <td data-label="Kind">{v.kind === "ENV" ? "environment" : "terraform"}</td>
                <td data-label="Set on">
                  here <span className="muted small"><TimeAgo iso={v.updatedAt} /></span>
                </td>
                <td className="right actions-cell">
                  <button className="btn small ghost" onClick={() => void remove(v.name)} aria-label={`Delete ${v.name}`}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
            {inherited.map((v) => (
              <tr key={`i:${v.kind}:${v.name}`} className="inherited" data-variable={v.name}>
                <td className="mono" data-label="Name">{v.name}</td>
                <td className="mono value-cell" data-label="Value">{v.sensitive ? <span className="sensitive">hidden (write-only)</span> : shownValue(v.value)}</td>
                <td data-label="Kind">{v.kind === "ENV" ? "environment" : "terraform"}</td>
                <td className="muted" data-label="Set on">inherited from {originLabel(v.origin)}</td>
                <td className="actions-cell" />
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <form className="var-form" onSubmit={save}>
        <input aria-label="Variable name" placeholder="name" value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} required />
        <input
          aria-label="Variable value"
          placeholder={form.sensitive ? "secret value (write-only)" : "value"}
          type={form.sensitive ? "password" : "text"}
          autoComplete="off"
          value={form.value}
          onChange={(e) => setForm({ ...form, value: e.target.value })}
        />
        <select aria-label="Variable kind" value={form.kind} onChange={(e) => setForm({ ...form, kind: e.target.value as VariableKind })}>
          <option value="TERRAFORM">terraform</option>
          <option value="ENV">environment</option>
        </select>
        <label className="check">
          <input type="checkbox" checked={form.sensitive} onChange={(e) => setForm({ ...form, sensitive: e.target.checked })} /> sensitive
        </label>
        <label className="check">
          <input type="checkbox" checked={form.json} onChange={(e) => setForm({ ...form, json: e.target.checked })} /> JSON value
        </label>
        <button className="btn primary" type="submit" disabled={busy}>
          Set variable
        </button>
      </form>
      <ErrorBox error={error} />
    </Card>
  );
}

/** A variable's value as set: a string as is, any other JSON value as JSON text. */
function shownValue(value: JsonValue | null): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}
