import { useState, type FormEvent } from "react";
import { useParams } from "react-router";
import { ConfirmDelete } from "../components/Confirm";
import { useAction, useApiQuery, useMutate } from "../api/hooks";
import { Card, Empty, ErrorBox, Loading, useOrgPageTitle } from "../components/ui";
import { CreatePolicyDocument, DeletePolicyDocument, PoliciesDocument, TestPolicyDocument, UpdatePolicyDocument } from "../graphql/generated";

const STARTER = `package firstlume.example

deny contains msg if {
  some rc in input.plan.resource_changes
  "delete" in rc.change.actions
  rc.change.before.input.protected == true
  msg := sprintf("%s is protected", [rc.address])
}
`;

type CompileError = { line: number | null; column: number | null; message: string };
type Draft = { name: string; kind: string; description: string; rego: string; isNew: boolean };
type Tested = { result: string; messages: string[]; tookMs: number };

/** The organization's Rego policies: admins write them with compile errors shown in place, and
 * test them against a past run's plan (or an input) before any stack uses them. */
export function PoliciesPage() {
  const { org = "" } = useParams();
  const { data, error, loading, refetch } = useApiQuery(PoliciesDocument, { org });
  const mutate = useMutate();
  const { busy, error: actionError, run } = useAction();
  const [draft, setDraft] = useState<Draft | null>(null);
  const [compileError, setCompileError] = useState<CompileError | null>(null);
  const [testRun, setTestRun] = useState("");
  const [tested, setTested] = useState<Tested | null>(null);
  useOrgPageTitle("Policies");
  const organization = data?.organization;
  if (!data && loading) return <Loading what="policies" />;
  if (!organization) return <ErrorBox error={error ?? `There is no organization "${org}" that you are a member of.`} />;
  const admin = organization.viewerCan.managePolicies;

  const edit = (next: Draft) => {
    setDraft(next);
    setCompileError(null);
    setTested(null);
  };
  const save = (event: FormEvent) => {
    event.preventDefault();
    if (!draft) return;
    void run(async () => {
      setCompileError(null);
      const result = draft.isNew
        ? (await mutate(CreatePolicyDocument, { org, name: draft.name.trim(), kind: draft.kind, rego: draft.rego, description: draft.description })).createPolicy
        : (await mutate(UpdatePolicyDocument, { org, name: draft.name, rego: draft.rego, description: draft.description })).updatePolicy;
      if (result.__typename === "RegoCompileError") {
        setCompileError({ line: result.line ?? null, column: result.column ?? null, message: result.message });
        return;
      }
      if (result.__typename !== "Policy") return result.message;
      setDraft({ ...draft, isNew: false });
      await refetch();
    });
  };
  const remove = (name: string) =>
    run(async () => {
      const { deletePolicy } = await mutate(DeletePolicyDocument, { org, name });
      if (deletePolicy.__typename !== "DeletedPolicy") return deletePolicy.message;
      setDraft(null);
      await refetch();
    });
  const test = () =>
    run(async () => {
      if (!draft) return;
      setTested(null);
      const { testPolicy } = await mutate(TestPolicyDocument, { org, name: draft.name, run: testRun.trim() });
      if (testPolicy.__typename !== "PolicyCheck") return testPolicy.message;
      setTested({ result: testPolicy.result, messages: testPolicy.messages, tookMs: testPolicy.tookMs });
    });

  return (
    <div className="page">
      <div className="page-head">
        <div>
          <h1>Policies</h1>
          <p className="muted">
            Rego v1, evaluated when each plan ends on the stacks whose <code>policies</code> setting names them. A plan policy's <code>deny</code> fails the
            run, its <code>warn</code> is shown; an approval policy's <code>approvals_required</code> and <code>approvers</code> add to the run's approval
            rules.
          </p>
        </div>
        {admin && (
          <button className="btn primary" onClick={() => edit({ name: "", kind: "plan", description: "", rego: STARTER, isNew: true })}>
            New policy
          </button>
        )}
      </div>
      <Card title="Policies of the organization">
        {organization.policies.length === 0 ? (
          <Empty title="No policies yet." />
        ) : (
          <table className="table responsive" data-testid="policies">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Kind</th>
                <th scope="col">Description</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {organization.policies.map((p) => (
                <tr key={p.name} data-policy={p.name}>
                  <td className="mono" data-label="Name">{p.name}</td>
                  <td data-label="Kind">{p.kind}</td>
                  <td data-label="Description">{p.description || <span className="muted">none</span>}</td>
                  <td className="right actions-cell">
                    <button className="btn small" onClick={() => edit({ name: p.name, kind: p.kind, description: p.description, rego: p.rego, isNew: false })}>
                      {admin ? "Edit" : "View"}
                    </button>
                    {admin && (
                      <ConfirmDelete
                        small
                        what="policy"
                        label="Delete"
                        ariaLabel={`Delete ${p.name}`}
                        name={p.name}
                        busy={busy}
                        error={null}
                        onDelete={() => void remove(p.name)}
                        question={
                          <>
                            <strong>Delete policy “{p.name}”?</strong> Its Rego cannot be restored: keep a copy if you may need it again.
                          </>
                        }
                      />
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Card>
      {draft && (
        <Card title={draft.isNew ? "New policy" : `Policy ${draft.name}`}>
          <form className="policy-form" onSubmit={save} aria-label="Policy">
            {draft.isNew && (
              <div className="var-form">
                <input aria-label="Name" placeholder="name" value={draft.name} onChange={(e) => setDraft({ ...draft, name: e.target.value })} required />
                <select aria-label="Kind" value={draft.kind} onChange={(e) => setDraft({ ...draft, kind: e.target.value })}>
                  <option value="plan">plan (deny, warn)</option>
                  <option value="approval">approval (approvals_required, approvers)</option>
                </select>
              </div>
            )}
            <input
              aria-label="Description"
              placeholder="description"
              value={draft.description}
              disabled={!admin}
              onChange={(e) => setDraft({ ...draft, description: e.target.value })}
            />
            <RegoEditor
              value={draft.rego}
              readOnly={!admin}
              error={compileError}
              onChange={(rego) => {
                setDraft({ ...draft, rego });
                setCompileError(null);
              }}
            />
            {admin && (
              <button className="btn primary" type="submit" disabled={busy}>
                {draft.isNew ? "Create policy" : "Save policy"}
              </button>
            )}
          </form>
          {!draft.isNew && admin && (
            <div className="policy-test" aria-label="Test the policy">
              <h3>Test against a past run</h3>
              <div className="var-form">
                <input aria-label="Run id" placeholder="run id (from a run's address)" value={testRun} onChange={(e) => setTestRun(e.target.value)} />
                <button className="btn" type="button" disabled={busy || !testRun.trim()} onClick={() => void test()}>
                  Test
                </button>
              </div>
              {tested && (
                <div className={`policy-check policy-${tested.result}`} data-testid="policy-test-result" data-result={tested.result}>
                  <strong>{tested.result}</strong> <span className="muted small">{tested.tookMs} ms</span>
                  {tested.messages.length > 0 && (
                    <ul className="small">
                      {tested.messages.map((m) => (
                        <li key={m}>{m}</li>
                      ))}
                    </ul>
                  )}
                </div>
              )}
            </div>
          )}
          <ErrorBox error={actionError} />
        </Card>
      )}
    </div>
  );
}

/** The module with line numbers; a compile error marks its line and is shown right under it. */
function RegoEditor({ value, readOnly, error, onChange }: { value: string; readOnly: boolean; error: CompileError | null; onChange: (rego: string) => void }) {
  const lines = value.split("\n");
  return (
    <div className="rego-editor">
      <textarea
        aria-label="Rego"
        className="mono"
        spellCheck={false}
        rows={Math.min(30, Math.max(10, lines.length + 1))}
        value={value}
        readOnly={readOnly}
        aria-invalid={error ? true : undefined}
        aria-describedby={error ? "rego-error" : undefined}
        onChange={(e) => onChange(e.target.value)}
      />
      {error && (
        <div className="alert alert-danger" role="alert" id="rego-error" data-testid="compile-error" data-line={error.line ?? ""} data-column={error.column ?? ""}>
          {error.line !== null && (
            <pre className="mono small">
              {`${error.line} | ${lines[error.line - 1] ?? ""}\n${" ".repeat(String(error.line).length + 3 + Math.max(0, (error.column ?? 1) - 1))}^`}
            </pre>
          )}
          {error.message}
        </div>
      )}
    </div>
  );
}
