import { useState, type FormEvent } from "react";
import { useParams } from "react-router";
import { useAction, useApiQuery, useMutate } from "../api/hooks";
import { ConfirmChange, ConfirmDelete, Saved } from "../components/Confirm";
import { Card, Empty, ErrorBox, Loading, useOrgPageTitle } from "../components/ui";
import { MembersDocument, RemoveMemberDocument, SetMemberDocument } from "../graphql/generated";

const ROLES = [
  { value: "reader", help: "sees stacks, runs, changes and logs" },
  { value: "operator", help: "also starts, approves, discards and cancels runs, and reads state" },
  { value: "admin", help: "also settings, variables, stacks, folders, members and force-unlock" },
];

const groupsOf = (text: string) =>
  text
    .split(",")
    .map((g) => g.trim())
    .filter(Boolean);

/** Members of the organization with their roles and groups; admins add, change and remove them. */
export function MembersPage() {
  const { org = "" } = useParams();
  const { data, error, loading, refetch } = useApiQuery(MembersDocument, { org });
  const mutate = useMutate();
  const { busy, error: actionError, run } = useAction();
  const [form, setForm] = useState({ email: "", role: "operator", groups: "" });
  useOrgPageTitle("Members");
  const organization = data?.organization;
  if (!data && loading) return <Loading what="members" />;
  if (!organization) return <ErrorBox error={error ?? `There is no organization "${org}" that you are a member of.`} />;
  // What the server says the viewer may do, not a copy of the rules.
  const admin = organization.viewerCan.setMember;

  const save = (email: string, role: string, groups: string[]) =>
    run(async () => {
      const { setMember } = await mutate(SetMemberDocument, { org, email, role, groups });
      if (setMember.__typename !== "Member") return setMember.message;
      await refetch();
    });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    void save(form.email.trim(), form.role, groupsOf(form.groups)).then(() => setForm({ email: "", role: "operator", groups: "" }));
  };

  return (
    <div className="page">
      <div className="page-head">
        <div>
          <h1>Members</h1>
          <p className="muted">
            Roles: {ROLES.map((r) => `${r.value} (${r.help})`).join("; ")}. Groups name people in <code>approvers</code>, as{" "}
            <code>group:&lt;name&gt;</code>. You are {organization.viewerRole === "admin" ? "an" : "a"} <strong>{organization.viewerRole}</strong> here.
          </p>
        </div>
      </div>
      <Card title="People">
        {organization.members.length === 0 ? (
          <Empty title="No members." />
        ) : (
          <table className="table responsive" data-testid="members">
            <thead>
              <tr>
                <th scope="col">Email</th>
                <th scope="col">Role</th>
                <th scope="col">Groups</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {organization.members.map((m) => (
                <MemberRow key={m.email} org={org} member={m} admin={admin} onChanged={refetch} />
              ))}
            </tbody>
          </table>
        )}
        {admin ? (
          <form className="var-form" onSubmit={submit} aria-label="Add or change a member">
            <input aria-label="Email" type="email" placeholder="email" value={form.email} onChange={(e) => setForm({ ...form, email: e.target.value })} required />
            <select aria-label="Role" value={form.role} onChange={(e) => setForm({ ...form, role: e.target.value })}>
              {ROLES.map((r) => (
                <option key={r.value} value={r.value}>
                  {r.value}
                </option>
              ))}
            </select>
            <input aria-label="Groups" placeholder="groups, comma-separated (sre, dba)" value={form.groups} onChange={(e) => setForm({ ...form, groups: e.target.value })} />
            <button className="btn primary" type="submit" disabled={busy}>
              Save member
            </button>
          </form>
        ) : (
          <p className="muted small pad" data-testid="members-readonly">Only admins can add, change or remove members.</p>
        )}
        <ErrorBox error={actionError} />
      </Card>
    </div>
  );
}

type MemberFacts = { email: string; role: string; groups: string[] };

const ROLE_GAINS: Record<string, string> = Object.fromEntries(ROLES.map((r) => [r.value, r.help]));

/** One member: role and groups are edited here, then saved with Save after a confirmation that
 * says what changes; "Saved" when the server took it. Remove asks first. */
function MemberRow({ org, member, admin, onChanged }: { org: string; member: MemberFacts; admin: boolean; onChanged: () => Promise<void> }) {
  const mutate = useMutate();
  const saving = useAction();
  const removal = useAction();
  const [role, setRole] = useState(member.role);
  const [groups, setGroups] = useState(member.groups.join(", "));
  const [asking, setAsking] = useState(false);
  const [saved, setSaved] = useState(false);
  const newGroups = groupsOf(groups);
  // Groups are a set: the server keeps them sorted.
  const sameGroups = [...new Set(newGroups)].sort().join(",") === [...member.groups].sort().join(",");
  const changed = role !== member.role || !sameGroups;
  const edit = (next: () => void) => {
    setSaved(false);
    setAsking(false);
    next();
  };
  const save = () =>
    saving.run(async () => {
      const { setMember } = await mutate(SetMemberDocument, { org, email: member.email, role, groups: newGroups });
      setAsking(false);
      if (setMember.__typename !== "Member") return setMember.message;
      setGroups(setMember.groups.join(", "));
      setSaved(true);
      await onChanged();
    });
  const remove = () =>
    removal.run(async () => {
      const { removeMember } = await mutate(RemoveMemberDocument, { org, email: member.email });
      if (removeMember.__typename !== "RemovedMember") return removeMember.message;
      await onChanged();
    });
  const what = [
    role !== member.role ? `role from ${member.role} to ${role} (${ROLE_GAINS[role]})` : "",
    !sameGroups ? `groups to ${newGroups.length ? newGroups.join(", ") : "none"}` : "",
  ]
    .filter(Boolean)
    .join(" and ");
  return (
    <tr data-member={member.email}>
      <td className="mono" data-label="Email">{member.email}</td>
      <td data-label="Role">
        <select aria-label={`Role of ${member.email}`} value={role} disabled={!admin || saving.busy} onChange={(e) => edit(() => setRole(e.target.value))}>
          {ROLES.map((r) => (
            <option key={r.value} value={r.value}>
              {r.value}
            </option>
          ))}
        </select>
      </td>
      <td data-label="Groups">
        {admin ? (
          <div className="member-edit">
            <input aria-label={`Groups of ${member.email}`} placeholder="none" value={groups} disabled={saving.busy} onChange={(e) => edit(() => setGroups(e.target.value))} />
            {changed && !asking && (
              <button type="button" className="btn small primary" onClick={() => setAsking(true)}>
                Save
              </button>
            )}
            <Saved show={saved && !changed} />
          </div>
        ) : member.groups.length ? (
          member.groups.join(", ")
        ) : (
          <span className="muted">none</span>
        )}
        {asking && changed && (
          <ConfirmChange
            busy={saving.busy}
            onBack={() => setAsking(false)}
            onSave={() => void save()}
            question={
              <>
                <strong>Change {member.email}?</strong> Their {what}, in every stack of the organization (folder grants may raise it further).
              </>
            }
          />
        )}
        <ErrorBox error={saving.error} title="The member was not changed." />
      </td>
      <td className="right actions-cell">
        {admin && (
          <ConfirmDelete
            small
            what="member"
            verb="Remove"
            label="Remove"
            ariaLabel={`Remove ${member.email}`}
            busy={removal.busy}
            error={removal.error}
            onDelete={() => void remove()}
            question={
              <>
                <strong>Remove {member.email}?</strong> They lose access to this organization at once; adding them again starts afresh.
              </>
            }
          />
        )}
      </td>
    </tr>
  );
}
