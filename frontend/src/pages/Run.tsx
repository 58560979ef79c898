import { useState } from "react";
import { Link, NavLink, useNavigate, useParams, useSearchParams } from "react-router";
import { useAction, useApiQuery, useLiveSubscription, useMutate } from "../api/hooks";
import { ChangesView, SummaryParts, type LiveStates } from "../components/Changes";
import { ConfigurationView } from "../components/Configuration";
import { LogViewer } from "../log/LogViewer";
import { StepStrip, StepTimeline } from "../components/Steps";
import { Empty, ErrorBox, Loading, NotFoundPage, StatusBadge, TimeAgo, TypeBadge, usePageTitle } from "../components/ui";
import { dateTime, originPhrase, plural, shortSha } from "../format";
import { WaitingFor } from "../components/Waiting";
import { RunTriage } from "../components/RunTriage";
import { Address } from "../components/Address";
import { changeAnchor } from "../components/ChangeOutcome";
import { CommitMessage, RunTiming } from "../components/RunTiming";
import {
  ApproveRunDocument,
  CancelRunDocument,
  DiscardRunDocument,
  ResourceStatesDocument,
  RunPageDocument,
  RunUpdatedDocument,
  type RunDetailFragment,
} from "../graphql/generated";
import { useDestructiveChanges, type DestructiveChange } from "../data/changes";

const TABS = [
  { path: "", label: "Changes" },
  { path: "steps", label: "Steps" },
  { path: "logs", label: "Logs" },
  { path: "configuration", label: "Configuration" },
];

/** A run's page; all its state starts afresh for another run. */
export function RunPage() {
  const { runId = "" } = useParams();
  return <RunView key={runId} />;
}

function RunView() {
  const { org = "", runId = "", "*": tab = "" } = useParams();
  const [search] = useSearchParams();
  const navigate = useNavigate();
  const { data, error, loading } = useApiQuery(RunPageDocument, { org, id: runId });
  const run = data?.organization?.run ?? null;
  // As every page of a stack: what, the stack's name, "Stacks".
  usePageTitle(run ? `Run #${run.number}` : "Run", run ? run.stack.name || run.stack.slug : undefined, "Stacks");

  // Its updates land in the cache, and so on this page (and every list showing the run).
  const updates = useLiveSubscription(RunUpdatedDocument, run && !run.finished ? { org, id: runId } : null, { next: () => {} });

  // Resource states, live from approval through the apply.
  const [states, setStates] = useState<LiveStates>(new Map());
  // Once watching, keep watching until the server completes the subscription: the run may finish
  // (and its status arrive) before the last resource states do.
  const [watching, setWatching] = useState(false);
  const appliesHere = Boolean(run?.summary && run.type !== "PLAN" && run.type !== "DRIFT");
  if (appliesHere && run && !run.finished && !watching) setWatching(true);
  const watchStates = appliesHere && watching;
  useLiveSubscription(ResourceStatesDocument, watchStates ? { org, id: runId } : null, {
    next: ({ resourceStates }) =>
      setStates((previous) => {
        const next = new Map(previous);
        for (const item of resourceStates) next.set(item.address, item);
        return next;
      }),
  });

  if (!data && loading) return <Loading what="the run" />;
  if (!run) {
    if (error) return <ErrorBox error={error} />;
    return <NotFoundPage title="There is no such run in this organization." back={`/orgs/${org}/stacks`} backLabel="All stacks" />;
  }

  const base = `/orgs/${org}/runs/${runId}`;
  const planned = run.summary?.text ?? null;
  return (
    <div className="page run-page" data-run-status={run.status}>
      <RunHeader org={org} run={run} onPickStep={(name) => navigate(`${base}/steps?step=${encodeURIComponent(name)}`)} />
      {updates.error && updates.error.code === "network" && <div className="reconnecting">Live updates interrupted; reconnecting…</div>}
      {run.proposed && (
        <div className="alert proposed-run" role="note" data-testid="proposed-run">
          <strong>Proposed run.</strong> It plans a pull request's head and is never applied: merging the pull request
          is what changes the infrastructure.
        </div>
      )}
      {run.error && (
        <div className="alert alert-danger run-error" role="alert" data-testid="run-error">
          <strong>The run failed.</strong>
          <pre>{run.error}</pre>
        </div>
      )}
      <RunTriage org={org} run={run} />
      <PolicyChecks checks={run.policyChecks ?? null} />
      {/* A proposed run only plans: nothing to approve. */}
      {!run.proposed && <ApprovalPanel org={org} run={run} />}
      <nav className="tabs" aria-label="Views of the run">
        {TABS.map((t) => (
          <NavLink key={t.path} end to={t.path ? `${base}/${t.path}` : base}>
            {t.label}
            {t.path === "" && run.summary && <span className="tab-count">{run.summary.delete + run.summary.replace + run.summary.update + run.summary.create + run.summary.outputs}</span>}
          </NavLink>
        ))}
      </nav>
      {tab === "" && (
        <ChangesView
          org={org}
          runId={runId}
          planned={planned}
          settled={run.status}
          states={states}
          empty={
            <Empty title={run.finished ? "This run produced no plan." : "The changes appear when the plan finishes."}>
              {!run.finished && (
                <>
                  Follow the plan in the <Link to={`${base}/logs`}>log</Link>.
                </>
              )}
            </Empty>
          }
        />
      )}
      {tab === "steps" && <StepTimeline key={search.get("step") ?? ""} org={org} run={run} openStep={search.get("step")} />}
      {tab === "logs" && (
        <LogViewer
          org={org}
          runId={run.id}
          steps={run.steps.filter((step) => step.name !== "approval")}
          runFinished={run.finished}
          downloadName={`${run.stack.slug}-run-${run.number}.log`}
          waiting={
            run.status === "QUEUED"
              ? `Waiting for the run to start${run.queuePosition ? ` (number ${run.queuePosition} in the stack's queue)` : ""}…`
              : "Waiting for output…"
          }
        />
      )}
      {tab === "configuration" && <ConfigurationView run={run} />}
      {!TABS.some((t) => t.path === tab) && <Empty title="There is no such view of a run." />}
    </div>
  );
}

function RunHeader({ org, run, onPickStep }: { org: string; run: RunDetailFragment; onPickStep: (name: string) => void }) {
  const mutate = useMutate();
  const { busy, error, run: act } = useAction();

  const cancel = () =>
    act(async () => {
      const { cancelRun } = await mutate(CancelRunDocument, { org, id: run.id });
      if (cancelRun.__typename !== "Run") return cancelRun.message;
    });

  return (
    <div className="run-head">
      <nav className="crumbs">
        <Link to={`/orgs/${org}/stacks`}>Stacks</Link>
        {run.stack.folder && (
          <>
            <span>/</span>
            <Link to={`/orgs/${org}/folders/${run.stack.folder.path}`}>{run.stack.folder.path}</Link>
          </>
        )}
        <span>/</span>
        <Link to={`/orgs/${org}/stacks/${run.stack.slug}`}>{run.stack.name || run.stack.slug}</Link>
      </nav>
      <div className="run-title">
        <h1>
          Run #{run.number}
        </h1>
        <TypeBadge type={run.type} />
        <span data-testid="run-status">
          <StatusBadge status={run.status} />
        </span>
        <span className="spacer" />
        {run.cancelable && run.stack.viewerCan.cancelRun && (
          <button className="btn" onClick={() => void cancel()} disabled={busy} title="Only queued runs can be canceled">
            Cancel run
          </button>
        )}
      </div>
      <div className="run-meta">
        <span>
          Started by <strong>{run.createdBy ?? "someone"}</strong> <TimeAgo iso={run.createdAt} />
        </span>
        {run.trigger.kind === "PUSH" && (
          <span data-testid="run-trigger">
            by a push
            {run.trigger.commit && (
              <>
                {" "}
                of <span className="mono">{shortSha(run.trigger.commit)}</span>
              </>
            )}
            {run.trigger.delivery ? (
              <>
                {" "}
                (delivery <span className="mono">{run.trigger.delivery}</span>)
              </>
            ) : (
              " (found by polling)"
            )}
          </span>
        )}
        {run.trigger.kind === "SCHEDULE" && <span data-testid="run-trigger">by the drift schedule</span>}
        {run.trigger.pullRequest && (
          <span data-testid="run-trigger">
            for pull request{" "}
            <a className="underlined" href={run.trigger.pullRequest.url} target="_blank" rel="noreferrer">
              #{run.trigger.pullRequest.number} {run.trigger.pullRequest.title}
            </a>
            {run.trigger.commit && (
              <>
                {" "}
                at <span className="mono">{shortSha(run.trigger.commit)}</span>
              </>
            )}
          </span>
        )}
        {run.finishedAt && <span title={dateTime(run.finishedAt)}>finished <TimeAgo iso={run.finishedAt} /></span>}
        {run.durationMs !== null && <RunTiming run={run} />}
        {run.endedBy && (
          <span data-testid="ended-by">
            {run.status === "DISCARDED" ? "discarded" : "canceled"} by <strong>{run.endedBy}</strong>
          </span>
        )}
        {run.summary && (
          <span>
            <SummaryParts summary={run.summary} />
          </span>
        )}
      </div>
      {run.commit ? (
        <div className="commit" data-testid="commit">
          <span className="commit-icon">⎇</span>
          {run.commit.url ? (
            <a className="mono" href={run.commit.url} target="_blank" rel="noreferrer" title={run.commit.sha}>
              {shortSha(run.commit.sha)}
            </a>
          ) : (
            <span className="mono" title={`${run.commit.sha} (local repository: no web link)`}>
              {shortSha(run.commit.sha)}
            </span>
          )}
          <CommitMessage message={run.commit.message ?? ""} />
          <span className="muted small">{run.commit.author}</span>
          <span className="muted small mono">
            {run.stack.branch} · {run.stack.path || "."}
          </span>
        </div>
      ) : (
        <div className="commit muted small">The commit is known after checkout ({run.stack.branch}).</div>
      )}
      <WaitingFor org={org} run={run} />
      <StepStrip steps={run.steps} onPick={onPickStep} />
      <ErrorBox error={error} />
    </div>
  );
}

// The server's limit (services/commands.py MAX_RUN_COMMENT): the field stops there.
const MAX_COMMENT = 2000;

function ApprovalPanel({ org, run }: { org: string; run: RunDetailFragment }) {
  const mutate = useMutate();
  const [ticked, setTicked] = useState<Set<string>>(new Set());
  const [comment, setComment] = useState("");
  const { busy, error, run: act } = useAction();
  const listed = useDestructiveChanges({ org, runId: run.id, planned: run.awaitingApproval ? (run.summary?.text ?? null) : null });
  const destructive = listed ?? [];
  const confirm = Boolean(run.approval.confirmDestructive) && destructive.length > 0;

  if (run.awaitingApproval) {
    const missing = confirm ? destructive.filter((d) => !ticked.has(d.address)).length : 0;
    const ready = listed !== null && missing === 0;

    const approve = () =>
      act(async () => {
        const acknowledged = confirm ? [...ticked] : [];
        const { approveRun } = await mutate(ApproveRunDocument, { org, id: run.id, acknowledged, comment: comment.trim() || null });
        if (approveRun.__typename === "AcknowledgementRequiredError")
          return `Confirm these first: ${approveRun.missing.join(", ")}.`;
        if (approveRun.__typename !== "Run") return approveRun.message;
      });
    const discard = () =>
      act(async () => {
        const { discardRun } = await mutate(DiscardRunDocument, { org, id: run.id, comment: comment.trim() || null });
        if (discardRun.__typename !== "Run") return discardRun.message;
      });

    return (
      <section className="approval waiting" data-testid="approval" aria-label="Approval">
        <div className="approval-head">
          <div>
            <h2>This plan is waiting for approval</h2>
            <p>
              Approving applies exactly this plan
              {run.summary ? (
                <>
                  : <strong>{run.summary.text}</strong>
                </>
              ) : null}
              .
              {run.configuration.settings && (
                <span className="muted small">
                  {" "}
                  {run.configuration.settings.requireApproval.origin === "default"
                    ? "Approval is required by default."
                    : `Required by ${originPhrase(run.configuration.settings.requireApproval.origin)}.`}
                </span>
              )}
            </p>
            <p className="small" data-testid="who-may-approve">
              {run.approval.approvers
                ? `Who may approve: ${run.approval.approvers.join(", ") || "nobody"}`
                : "Who may approve: any operator or admin"}
              {run.configuration.settings && run.configuration.settings.approvers.origin !== "default"
                ? ` (set by ${originPhrase(run.configuration.settings.approvers.origin)})`
                : ""}
              {run.approval.forbidSelfApproval ? "; not the person who started the run, nor the author of the pushed commit." : "."}
            </p>
            {run.approval.approvalsProgress && (
              <p className="small" data-testid="approvals-progress">
                Approvals: <strong>{run.approval.approvalsProgress}</strong>
                {run.approval.policyApprovers ? ` from ${run.approval.policyApprovers.join(", ")}` : ""} (asked for by the approval policies)
                {run.approval.approvals.length > 0
                  ? `; approved by ${run.approval.approvals.map((a) => (a.comment ? `${a.by} (“${a.comment}”)` : a.by)).join(", ")}.`
                  : "."}
              </p>
            )}
            {!run.approval.viewerCanApprove && run.approval.viewerCannotApproveReason && (
              <p className="small warning-text" role="note" data-testid="cannot-approve">
                You cannot approve this run: {run.approval.viewerCannotApproveReason}.
              </p>
            )}
          </div>
        </div>
        {confirm && (
          <ConfirmList
            destructive={destructive}
            ticked={ticked}
            onTicked={setTicked}
            origin={originPhrase(run.configuration.settings?.confirmDestructive.origin ?? "")}
            changesPath={`/orgs/${org}/runs/${run.id}`}
            disabled={!run.approval.viewerCanApprove}
          />
        )}
        {/* After the confirmations, before the buttons: tabbing reaches the boxes, the comment, then Approve. */}
        <div className="approval-decide">
          <label className="approval-comment">
            <span>
              Comment <span className="muted small">(optional: shown on the run, in notifications and in the audit trail)</span>
            </span>
            <textarea
              rows={2}
              maxLength={MAX_COMMENT}
              value={comment}
              onChange={(e) => setComment(e.target.value)}
              placeholder="Why: a ticket, the change window…"
              data-testid="approval-comment"
            />
          </label>
          <div className="actions">
            <button
              className="btn"
              onClick={() => void discard()}
              disabled={busy || !run.approval.viewerCanDiscard}
              title={run.approval.viewerCanDiscard ? undefined : (run.approval.viewerCannotApproveReason ?? undefined)}
            >
              Discard
            </button>
            <button
              className="btn primary"
              onClick={() => void approve()}
              disabled={busy || !ready || !run.approval.viewerCanApprove}
              title={
                !run.approval.viewerCanApprove
                  ? (run.approval.viewerCannotApproveReason ?? undefined)
                  : missing
                    ? `Tick ${plural(missing, "more resource")} to approve`
                    : undefined
              }
            >
              {missing ? `Approve (${missing} to confirm)` : "Approve"}
            </button>
          </div>
        </div>
        <ErrorBox error={error} />
      </section>
    );
  }

  if (run.approval.approvedBy) {
    return (
      <section className="approval done" data-testid="approval" aria-label="Approval">
        <p>
          ✓ Approved by <strong data-testid="approved-by">{run.approval.approvedBy}</strong>{" "}
          <span title={dateTime(run.approval.approvedAt)}>
            <TimeAgo iso={run.approval.approvedAt} />
          </span>
          .
        </p>
        <DecisionComment comment={run.comment} />
        {run.approval.acknowledged.length > 0 && (
          <p className="small">
            Confirmed deletions and replacements:{" "}
            <span data-testid="acknowledged">
              {run.approval.acknowledged.map((a, i) => (
                <span key={a}>
                  {i > 0 && ", "}
                  <span className="mono">{a}</span>
                </span>
              ))}
            </span>
          </p>
        )}
      </section>
    );
  }
  if (run.status === "DISCARDED") {
    return (
      <section className="approval discarded" aria-label="Approval">
        <p>
          The plan was discarded{run.endedBy && <> by <strong data-testid="discarded-by">{run.endedBy}</strong></>}
          {run.finishedAt && (
            <>
              {" "}
              <TimeAgo iso={run.finishedAt} />
            </>
          )}
          ; nothing was applied.
        </p>
        <DecisionComment comment={run.comment} />
      </section>
    );
  }
  if (run.status === "CANCELED") {
    return (
      <section className="approval discarded" aria-label="Cancellation">
        <p>
          The run was canceled{run.endedBy && <> by <strong data-testid="canceled-by">{run.endedBy}</strong></>}
          {run.finishedAt && (
            <>
              {" "}
              <TimeAgo iso={run.finishedAt} />
            </>
          )}{" "}
          before it {run.summary ? "applied anything" : "started"}.
        </p>
      </section>
    );
  }
  return null;
}

/** The comment given with the approval or discard that decided the run. */
function DecisionComment({ comment }: { comment: string | null | undefined }) {
  if (!comment) return null;
  return (
    <blockquote className="decision-comment" data-testid="decision-comment">
      {comment}
    </blockquote>
  );
}

/**
 * confirm_destructive: a tick per deletion or replacement. "Tick all" ticks every one at once,
 * after saying how many; approving is still its own, explicit click.
 */
function ConfirmList({
  destructive,
  ticked,
  onTicked,
  origin,
  changesPath,
  disabled,
}: {
  destructive: DestructiveChange[];
  ticked: Set<string>;
  onTicked: (ticked: Set<string>) => void;
  origin: string;
  /** The run's Changes tab: each item links to its diff there. */
  changesPath: string;
  /** The viewer may not approve: the ticks are shown, not offered. */
  disabled: boolean;
}) {
  const [asking, setAsking] = useState(false);
  const missing = destructive.filter((d) => !ticked.has(d.address)).length;
  const deletions = destructive.filter((d) => d.action === "DELETE").length;
  const replacements = destructive.length - deletions;
  const what = [deletions ? plural(deletions, "deletion") : "", replacements ? plural(replacements, "replacement") : ""].filter(Boolean).join(" and ");
  return (
    <div className="confirm-list">
      <p className="small">
        <strong>confirm_destructive is on</strong> (from {origin}): tick each resource that will be deleted or replaced.{" "}
        <span data-testid="confirm-progress">
          {destructive.length - missing} of {destructive.length} confirmed
        </span>
      </p>
      <div className="tick-all" data-testid="tick-all" hidden={disabled}>
        {asking ? (
          <div className="tick-all-confirm" role="alertdialog" aria-labelledby="tick-all-question">
            <span id="tick-all-question">
              Tick all {destructive.length.toLocaleString()} addresses ({what})? You still approve with the Approve button.
            </span>
            <span className="actions">
              <button type="button" className="btn small" onClick={() => setAsking(false)}>
                Cancel
              </button>
              <button
                type="button"
                className="btn small danger"
                autoFocus
                onClick={() => {
                  onTicked(new Set(destructive.map((d) => d.address)));
                  setAsking(false);
                }}
              >
                Yes, tick all {destructive.length.toLocaleString()}
              </button>
            </span>
          </div>
        ) : missing > 0 ? (
          <button type="button" className="btn small" onClick={() => setAsking(true)}>
            Tick all {destructive.length.toLocaleString()}
          </button>
        ) : (
          <button type="button" className="btn small" onClick={() => onTicked(new Set())}>
            Untick all
          </button>
        )}
      </div>
      <ul>
        {destructive.map((d) => (
          <li key={d.address}>
            <label className={ticked.has(d.address) ? "ticked" : ""}>
              <input
                type="checkbox"
                disabled={disabled}
                checked={ticked.has(d.address)}
                onChange={(e) => {
                  const next = new Set(ticked);
                  if (e.target.checked) next.add(d.address);
                  else next.delete(d.address);
                  onTicked(next);
                }}
                aria-label={`Confirm ${d.action === "DELETE" ? "deleting" : "replacing"} ${d.address}`}
              />
              <span className={`act-${d.action.toLowerCase()} verb`}>{d.action === "DELETE" ? "delete" : "replace"}</span>
              <Address address={d.address} className="confirm-address" />
            </label>
            <Link
              className="small diff-link"
              to={`${changesPath}?q=${encodeURIComponent(d.address)}#${encodeURIComponent(changeAnchor(d.address))}`}
              aria-label={`Diff of ${d.address}`}
            >
              diff
            </Link>
          </li>
        ))}
      </ul>
    </div>
  );
}

const RESULT_LABELS: Record<string, string> = { pass: "passed", warn: "warning", deny: "denied" };

/** Each policy's result, evaluated when the plan finished (adoption-api.md section 8). */
function PolicyChecks({ checks }: { checks: RunDetailFragment["policyChecks"] | null }) {
  if (!checks || checks.length === 0) return null;
  return (
    <section className="card policy-checks" data-testid="policy-checks" aria-label="Policy checks">
      <h2 className="card-title">Policy checks</h2>
      <ul className="plain-list">
        {checks.map((check) => (
          <li key={check.policy} data-policy={check.policy} data-result={check.result} className={`policy-check policy-${check.result}`}>
            <strong>{check.policy}</strong> <span className="muted small">({check.kind})</span>{" "}
            <span className={`badge badge-${check.result}`}>{RESULT_LABELS[check.result] ?? check.result}</span>{" "}
            <span className="muted small">{check.tookMs} ms</span>
            {check.messages.length > 0 && (
              <ul className="small">
                {check.messages.map((message) => (
                  <li key={message}>{message}</li>
                ))}
              </ul>
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}
