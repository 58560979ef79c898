import { Link, useParams } from "react-router";
import { useApiQuery } from "../api/hooks";
import { Card, Empty, ErrorBox, Loading, NotFoundPage, TimeAgo, usePageTitle } from "../components/ui";
import { shortSha } from "../format";
import { StackPullRequestsDocument } from "../graphql/generated";
import { StackHeader } from "./Stack";

/** A stack's pull requests: each one's proposed runs (plans that never apply), newest first. */
export function StackPullRequestsPage() {
  const { org = "", slug = "" } = useParams();
  const { data, error, loading } = useApiQuery(StackPullRequestsDocument, { org, slug });
  const stack = data?.organization?.stack;
  usePageTitle("Pull requests", stack ? stack.name || stack.slug : slug, "Stacks");

  if (!data && loading) return <Loading what="the pull requests" />;
  if (error && !data) return <ErrorBox error={error} />;
  if (!stack) return <NotFoundPage title={`There is no stack “${slug}” here.`} back={`/orgs/${org}/stacks`} backLabel="All stacks" />;
  const pulls = data?.organization?.pullRequests ?? [];

  return (
    <div className="page pull-requests-page">
      <StackHeader org={org} slug={slug} folder={stack.folder?.path} title={stack.name || stack.slug} />
      {stack.pullRequests === "OFF" && (
        <p className="hint" data-testid="pull-requests-off">
          Pull requests start nothing for this stack: set its <code>pull_requests</code> to <code>plan</code> to plan
          every pull request that touches it.
        </p>
      )}
      {pulls.length === 0 ? (
        <Card>
          <Empty title="No pull requests yet.">A pull request that touches this stack gets a proposed run here.</Empty>
        </Card>
      ) : (
        <div className="table-box">
          <table className="table" data-testid="pull-requests">
            <thead>
              <tr>
                <th>Pull request</th>
                <th>State</th>
                <th>Head</th>
                <th>Proposed runs</th>
              </tr>
            </thead>
            <tbody>
              {pulls.map((pull) => (
                <tr key={`${pull.repository}#${pull.number}`}>
                  <td>
                    <a className="underlined" href={pull.url} target="_blank" rel="noreferrer">
                      #{pull.number} {pull.title}
                    </a>{" "}
                    by {pull.author} <TimeAgo iso={pull.updatedAt} />
                  </td>
                  <td>{pull.state}</td>
                  <td className="mono">{shortSha(pull.headSha)}</td>
                  <td>
                    {pull.runs.map((run) => (
                      <div key={run.id}>
                        <Link className="underlined" to={`/orgs/${org}/runs/${run.id}`}>#{run.number}</Link> {run.status.replace("_", " ")}
                        {run.status === "planned" &&
                          ` · ${run.toCreate + run.toReplace} to add, ${run.toUpdate} to change, ${run.toDelete + run.toReplace} to destroy`}
                        {run.headSha && <span className="mono"> at {shortSha(run.headSha)}</span>}
                        {run.error && <div className="muted">{run.error}</div>}
                      </div>
                    ))}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}
