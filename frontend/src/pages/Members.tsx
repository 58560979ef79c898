import { useState, type FormEvent } from "react";
import { useParams } from "react-router";
import { useAction, useApiQuery, useMutate } from "../api/hooks";
import { Card, Empty, ErrorBox, Loading, usePageTitle } from "../components/ui";
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
  usePageTitle("Members", org);
  const organization = data?.organization;
  if (!data && loading) return <Loading what="members" />;
  if (!organization) return <ErrorBox error={error ?? `There is no organization "${org}" that you are a member of.`} />;
  const admin = organization.viewerRole === "admin";
  const why = admin ? undefined : "Only admins can change members";

  const save = (email: string, role: string, groups: string[]) =>
    run(async () => {
      const { setMember } = await mutate(SetMemberDocument, { org, email, role, groups });
      if (setMember.__typename !== "Member") return setMember.message;
      await refetch();
    });
  const remove = (email: string) =>
    run(async () => {
      const { removeMember } = await mutate(RemoveMemberDocument, { org, email });
      if (removeMember.__typename !== "RemovedMember") return removeMember.message;
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
                <tr key={m.email} data-member={m.email}>
                  <td className="mono" data-label="Email">{m.email}</td>
                  <td data-label="Role">
                    <select
                      aria-label={`Role of ${m.email}`}
                      value={m.role}
                      disabled={!admin || busy}
                      title={why}
                      onChange={(e) => void save(m.email, e.target.value, m.groups)}
                    >
                      {ROLES.map((r) => (
                        <option key={r.value} value={r.value}>
                          {r.value}
                        </option>
                      ))}
                    </select>
                  </td>
                  <td data-label="Groups">{m.groups.length ? m.groups.join(", ") : <span className="muted">none</span>}</td>
                  <td className="right actions-cell">
                    <button className="btn small ghost" disabled={!admin || busy} title={why} onClick={() => void remove(m.email)} aria-label={`Remove ${m.email}`}>
                      Remove
                    </button>
                  </td>
                </tr>
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
