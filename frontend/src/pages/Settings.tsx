import { useState, type FormEvent, type ReactNode } from "react";
import { Link, useParams } from "react-router";
import { useAction, useApiQuery, useMutate } from "../api/hooks";
import { ConfirmChange, ConfirmDelete, Saved } from "../components/Confirm";
import { ManageFolder, ManageStack } from "../components/Manage";
import { Card, Empty, ErrorBox, Loading, NotFoundPage, TimeAgo, useOrgPageTitle, usePageTitle } from "../components/ui";
import { originLabel, plural } from "../format";
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
  useOrgPageTitle("Settings");
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
      <SettingsCard key={"org"} org={org} level={{}} settings={organization.settings} may={organization.viewerCan.updateSettings} />
      <VariablesCard org={org} level={{}} own={organization.variables} inherited={[]} may={organization.viewerCan.setVariable} />
    </div>
  );
}

export function FolderSettingsPage() {
  const { org = "", "*": path = "" } = useParams();
  const { data, error, loading } = useApiQuery(FolderLevelDocument, { org, path });
  const folder = data?.organization?.folder;
  useOrgPageTitle(`Settings · ${path}`);
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
      <SettingsCard key={folder.path} org={org} level={{ folder: folder.path }} settings={folder.settings} may={folder.viewerCan.updateSettings} />
      <VariablesCard
        org={org}
        level={{ folder: folder.path }}
        may={folder.viewerCan.setVariable}
        own={folder.variables}
        inherited={inherited(data.organization.variables, data.organization.folders, outer, folder.variables)}
      />
      {folder.viewerCan.moveFolder && <ManageFolder key={folder.path} org={org} path={folder.path} />}
    </div>
  );
}

export function StackSettingsPage() {
  const { org = "", slug = "" } = useParams();
  const { data, error, loading } = useApiQuery(StackLevelDocument, { org, slug });
  const stack = data?.organization?.stack;
  usePageTitle("Settings", stack ? stack.name || stack.slug : slug, "Stacks");
  if (!data && loading) return <Loading what="the stack's settings" />;
  if (!data?.organization || !stack) {
    return error ? <ErrorBox error={error} /> : <NotFoundPage title={`There is no stack “${slug}” here.`} back={`/orgs/${org}/stacks`} backLabel="All stacks" />;
  }
  return (
    <div className="page">
      <StackHeader org={org} slug={slug} folder={stack.folder?.path} title={stack.slug} />
      <SettingsCard key={slug} org={org} level={{ stack: slug }} settings={stack.settings} may={stack.viewerCan.updateSettings} />
      <VariablesCard
        org={org}
        level={{ stack: slug }}
        may={stack.viewerCan.setVariable}
        own={stack.variables}
        inherited={inherited(data.organization.variables, data.organization.folders, chain(stack.folder?.path), stack.variables)}
      />
      {stack.viewerCan.updateStack && (
        <ManageStack
          key={`${stack.slug}|${stack.folder?.path ?? ""}|${stack.name}`}
          org={org}
          stack={{
            slug: stack.slug,
            name: stack.name,
            folder: stack.folder?.path ?? null,
            gitAuth: stack.gitAuth,
            repository: stack.repository,
            branch: stack.branch,
            path: stack.path,
          }}
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

type BoolKey = "requireApproval" | "confirmDestructive" | "forbidSelfApproval";
type Draft = Record<BoolKey, boolean | null> & { approvers: string | null; policies: string | null };
const SNAKE: Record<keyof Draft, string> = {
  requireApproval: "require_approval",
  confirmDestructive: "confirm_destructive",
  forbidSelfApproval: "forbid_self_approval",
  approvers: "approvers",
  policies: "policies",
};

const entriesOf = (text: string) =>
  text
    .split(",")
    .map((e) => e.trim())
    .filter(Boolean);

function draftOf(settings: SettingsViewFragment): Draft {
  const e = settings.explicit;
  return {
    requireApproval: e.requireApproval ?? null,
    confirmDestructive: e.confirmDestructive ?? null,
    forbidSelfApproval: e.forbidSelfApproval ?? null,
    approvers: e.approvers ? e.approvers.join(", ") : null,
    policies: e.policies ? e.policies.join(", ") : null,
  };
}

/** What a draft changes, as the mutation's input: only the settings that differ from the server's. */
function changesOf(draft: Draft, saved: Draft): Record<string, boolean | string[] | null> {
  const input: Record<string, boolean | string[] | null> = {};
  for (const key of ["requireApproval", "confirmDestructive", "forbidSelfApproval"] as const) {
    if (draft[key] !== saved[key]) input[key] = draft[key];
  }
  // approvers: no entries means none set here (any operator or admin, or inherit).
  const approvers = draft.approvers === null ? null : entriesOf(draft.approvers);
  const savedApprovers = saved.approvers === null ? null : entriesOf(saved.approvers);
  const normal = (v: string[] | null) => (v && v.length ? v.join(",") : null);
  if (normal(approvers) !== normal(savedApprovers)) input.approvers = approvers && approvers.length ? approvers : null;
  // policies: null inherits, an empty list turns them off at this level.
  const policies = draft.policies === null ? null : entriesOf(draft.policies);
  const savedPolicies = saved.policies === null ? null : entriesOf(saved.policies);
  if ((policies === null) !== (savedPolicies === null) || (policies ?? []).join(",") !== (savedPolicies ?? []).join(",")) input.policies = policies;
  return input;
}

/** The approval rules of a level: picked here, then saved with one Save after a confirmation that
 * names how many stacks the change reaches; "Saved" when the server took it. Read-only for those
 * the server says may not change settings here. */
function SettingsCard({ org, level, settings, may }: { org: string; level: Level; settings: SettingsViewFragment; may: boolean }) {
  const mutate = useMutate();
  const { busy, error, run, done, reset } = useAction();
  const here = level.stack ? "this stack" : level.folder ? "this folder" : "the organization";
  const saved = draftOf(settings);
  const [draft, setDraftState] = useState<Draft>(saved);
  const [asking, setAsking] = useState(false);
  const changes = changesOf(draft, saved);
  const changed = Object.keys(changes);
  const setDraft = (next: Draft) => {
    reset();
    setAsking(false);
    setDraftState(next);
  };

  const save = () =>
    run(async () => {
      const { updateSettings } = await mutate(UpdateSettingsDocument, { org, input: changes, folder: level.folder ?? null, stack: level.stack ?? null });
      setAsking(false);
      if (updateSettings.__typename !== "Settings") return updateSettings.message;
      setDraftState(draftOf(updateSettings));
    });

  // "applies to 14 stacks under prod/": the server counts the stacks that take each setting from here.
  const reach = (key: keyof Draft) => settings.reach.find((r) => r.setting === SNAKE[key])?.stacks ?? 0;
  const where = level.folder ? ` under ${level.folder}/` : level.stack ? "" : " of the organization";
  const counts = [...new Set(changed.map((k) => reach(k as keyof Draft)))];
  const scope = level.stack
    ? "It applies to this stack's next plans."
    : counts.length === 1
      ? `It applies to ${plural(counts[0], "stack")}${where} (those that do not set it themselves), from their next plan.`
      : `It applies, from their next plan, to ${changed.map((k) => `${SNAKE[k as keyof Draft]}: ${plural(reach(k as keyof Draft), "stack")}`).join("; ")}${where}.`;

  return (
    <Card title="Approval rules" className="approval-rules">
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
                    type="button"
                    role="radio"
                    aria-checked={draft[s.key] === option.value}
                    className={draft[s.key] === option.value ? "on" : ""}
                    disabled={busy || !may}
                    onClick={() => setDraft({ ...draft, [s.key]: option.value })}
                  >
                    {option.label}
                  </button>
                ))}
              </div>
            </div>
          );
        })}
        <ListSetting
          name="approvers"
          title="Approvers"
          help={
            <>
              Who may approve or discard: <code>user:&lt;email&gt;</code> and <code>group:&lt;name&gt;</code> entries (groups are set on the
              Members page). Empty: any operator or admin.
            </>
          }
          placeholder="group:sre, user:ada@example.com"
          shown={settings.effective.approvers.value ? settings.effective.approvers.value.join(", ") || "nobody" : "any operator or admin"}
          explicit={settings.explicit.approvers ?? null}
          origin={settings.effective.approvers.origin}
          here={here}
          inherits={Boolean(level.folder || level.stack)}
          value={draft.approvers}
          disabled={busy || !may}
          onChange={(value) => setDraft({ ...draft, approvers: value })}
        />
        <ListSetting
          name="policies"
          title="Policies"
          help={
            <>
              Names of the organization&apos;s policies (the Policies page) evaluated when each plan ends. A deny fails the run; approval policies add
              to the approval rules.
            </>
          }
          placeholder="protect, dba"
          shown={settings.effective.policies.value && settings.effective.policies.value.length ? settings.effective.policies.value.join(", ") : "none"}
          explicit={settings.explicit.policies ?? null}
          origin={settings.effective.policies.origin}
          here={here}
          inherits={Boolean(level.folder || level.stack)}
          value={draft.policies}
          disabled={busy || !may}
          onChange={(value) => setDraft({ ...draft, policies: value })}
        />
      </div>
      {may ? (
        <>
          {asking && changed.length > 0 && (
            <div className="pad">
              <ConfirmChange
                busy={busy}
                onBack={() => setAsking(false)}
                onSave={() => void save()}
                question={
                  <>
                    <strong>
                      Change {changed.map((k) => SNAKE[k as keyof Draft]).join(", ")} on {here}?
                    </strong>{" "}
                    <span data-testid="settings-scope">{scope}</span>
                  </>
                }
              />
            </div>
          )}
          <div className="settings-save">
            <button type="button" className="btn primary" disabled={busy || changed.length === 0 || asking} onClick={() => setAsking(true)}>
              Save approval rules
            </button>
            {changed.length > 0 && (
              <button type="button" className="btn ghost" disabled={busy} onClick={() => setDraft(saved)}>
                Undo changes
              </button>
            )}
            <span className="muted small">{changed.length ? `${plural(changed.length, "unsaved change")}.` : ""}</span>
            <Saved show={done && changed.length === 0} />
          </div>
        </>
      ) : (
        <p className="muted small pad" data-testid="settings-readonly">
          Only admins can change these rules (<Link to={`/orgs/${org}/members`}>who they are</Link>).
        </p>
      )}
      <ErrorBox error={error} title="The approval rules were not saved." />
    </Card>
  );
}

/** approvers or policies: comma-separated entries; null (the Inherit or Default button) sets none here. */
function ListSetting(props: {
  name: string;
  title: string;
  help: ReactNode;
  placeholder: string;
  shown: string;
  explicit: string[] | null;
  origin: string;
  here: string;
  inherits: boolean;
  value: string | null;
  disabled: boolean;
  onChange: (value: string | null) => void;
}) {
  return (
    <div className="setting" data-setting={props.name}>
      <div className="setting-text">
        <div className="setting-title">
          {props.title} <code>{props.name}</code>
        </div>
        <div className="muted small">{props.help}</div>
        <div className="effective" data-testid="effective">
          Effective here: <strong>{props.shown}</strong>{" "}
          <span className="muted">{props.explicit === null ? `inherited from ${originLabel(props.origin)}` : `set on ${props.here}`}</span>
        </div>
      </div>
      <div className="approvers-form">
        <input
          aria-label={props.name}
          placeholder={props.value === null ? (props.inherits ? "inherited" : props.placeholder) : props.placeholder}
          value={props.value ?? ""}
          disabled={props.disabled}
          onChange={(e) => props.onChange(e.target.value)}
        />
        {props.value !== null && (
          <button className="btn small ghost" type="button" disabled={props.disabled} onClick={() => props.onChange(null)}>
            {props.inherits ? "Inherit" : "Default"}
          </button>
        )}
      </div>
    </div>
  );
}

// Variables ----------------------------------------------------------------------------------

function VariablesCard({
  org,
  level,
  own,
  inherited,
  may,
}: {
  org: string;
  level: Level;
  own: VariableViewFragment[];
  inherited: Inherited[];
  may: boolean;
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
                  {may && (
                    <ConfirmDelete
                      small
                      what="variable"
                      label={`Delete ${v.name}`}
                      busy={busy}
                      error={null}
                      onDelete={() => void remove(v.name)}
                      question={
                        <>
                          <strong>Delete {v.name}?</strong>{" "}
                          {v.sensitive ? "Its value is write-only: it cannot be read back to set it again." : "Levels below take the inherited value, if any."}
                        </>
                      }
                    />
                  )}
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
      {may ? (
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
      ) : (
        <p className="muted small pad" data-testid="variables-readonly">
          Only admins can set variables (<Link to={`/orgs/${org}/members`}>who they are</Link>).
        </p>
      )}
      <ErrorBox error={error} />
    </Card>
  );
}

/** A variable's value as set: a string as is, any other JSON value as JSON text. */
function shownValue(value: JsonValue | null): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}
