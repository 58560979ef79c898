import { useEffect, useMemo, useRef, useState } from "react";
import { Link, useParams } from "react-router";
import { useApiQuery } from "../api/hooks";
import { Card, Empty, ErrorBox, Loading, NotFoundPage, StatusBadge, useOrgPageTitle, usePageTitle } from "../components/ui";
import { statusTone } from "../format";
import { DependencyGraphDocument, StackDependenciesDocument, type RunStatus } from "../graphql/generated";
import { StackHeader } from "./Stack";

type Mapping = { output: string; variable: string };
type Edge = { upstream: string; downstream: string; outputs: Mapping[] };
type Node = { stack: string; name: string; lastRunId?: string | null; lastRunStatus?: RunStatus | null };

/** Each stack's column: 0 for a stack that reads no other, else one more than its deepest upstream. */
function layers(nodes: Node[], edges: Edge[]): Node[][] {
  const upstreams = new Map<string, string[]>();
  for (const e of edges) upstreams.set(e.downstream, [...(upstreams.get(e.downstream) ?? []), e.upstream]);
  const depth = new Map<string, number>();
  // The server refuses cycles; the guard only keeps a bad answer from looping forever.
  const depthOf = (stack: string, seen: Set<string>): number => {
    const known = depth.get(stack);
    if (known !== undefined) return known;
    if (seen.has(stack)) return 0;
    seen.add(stack);
    const ups = upstreams.get(stack) ?? [];
    const value = ups.length === 0 ? 0 : 1 + Math.max(...ups.map((u) => depthOf(u, seen)));
    depth.set(stack, value);
    return value;
  };
  const columns: Node[][] = [];
  for (const node of nodes) {
    const d = depthOf(node.stack, new Set());
    (columns[d] ??= []).push(node);
  }
  return columns.filter(Boolean);
}

function reads(outputs: Mapping[]): string {
  return outputs.map((m) => (m.output === m.variable ? m.output : `${m.output} → ${m.variable}`)).join(", ");
}

/** The organization's dependency graph: stacks in columns (upstream left), coloured by their last
 * run's status; choosing one lists its upstream and downstream stacks, each a step away by keyboard. */
export function DependenciesPage() {
  const { org = "" } = useParams();
  const { data, error, loading } = useApiQuery(DependencyGraphDocument, { org });
  const [selected, setSelected] = useState<string | null>(null);
  const buttons = useRef(new Map<string, HTMLButtonElement>());
  const [focusNext, setFocusNext] = useState<string | null>(null);
  useOrgPageTitle("Dependencies");
  const graph = data?.organization?.dependencyGraph;
  const columns = useMemo(() => (graph ? layers(graph.nodes, graph.edges) : []), [graph]);
  useEffect(() => {
    if (focusNext) {
      buttons.current.get(focusNext)?.focus();
      setFocusNext(null);
    }
  }, [focusNext]);
  if (!data && loading) return <Loading what="the dependency graph" />;
  if (error && !data) return <ErrorBox error={error} />;
  if (!graph) return <NotFoundPage title="There is no such organization." />;
  const byStack = new Map(graph.nodes.map((n) => [n.stack, n]));
  const upstream = graph.edges.filter((e) => e.downstream === selected);
  const downstream = graph.edges.filter((e) => e.upstream === selected);
  const go = (stack: string) => {
    setSelected(stack);
    setFocusNext(stack);
  };
  return (
    <div className="page dependencies-page">
      <div className="page-head">
        <div>
          <h1>Dependencies</h1>
          <p className="muted">
            Which stacks read which outputs, upstream on the left. Set them with <code>PUT …/stacks/&lt;stack&gt;/dependencies</code>.
          </p>
        </div>
      </div>
      <ErrorBox error={error} />
      {graph.nodes.length === 0 ? (
        <Card>
          <Empty title="No stacks yet." />
        </Card>
      ) : (
        <div className="dependency-layout">
          <Card className="dependency-graph-card">
            <div className="dependency-graph" role="group" aria-label="Dependency graph">
              {columns.map((column, index) => (
                <ul className="dependency-column" key={index} aria-label={index === 0 ? "Stacks that read no other stack" : `Level ${index + 1}`}>
                  {column.map((node) => (
                    <li key={node.stack}>
                      <button
                        type="button"
                        ref={(element) => {
                          if (element) buttons.current.set(node.stack, element);
                          else buttons.current.delete(node.stack);
                        }}
                        className={`graph-node tone-border-${node.lastRunStatus ? statusTone(node.lastRunStatus) : "muted"}`}
                        data-stack={node.stack}
                        data-status={node.lastRunStatus ?? "NONE"}
                        aria-pressed={selected === node.stack}
                        onClick={() => setSelected(node.stack)}
                      >
                        <span className="graph-node-name">{node.name || node.stack}</span>
                        {node.lastRunStatus ? <StatusBadge status={node.lastRunStatus} /> : <span className="badge tone-muted">no runs</span>}
                      </button>
                    </li>
                  ))}
                </ul>
              ))}
            </div>
          </Card>
          <Card className="dependency-panel" title={selected ? `${byStack.get(selected)?.name || selected}` : "Choose a stack"}>
            <div aria-live="polite" data-testid="dependency-panel">
              {!selected ? (
                <p className="muted">Choose a stack to see the stacks it reads and the stacks that read it.</p>
              ) : (
                <>
                  <p>
                    <Link to={`/orgs/${org}/stacks/${selected}`}>Open {selected}</Link>
                  </p>
                  <h3>Upstream</h3>
                  <Neighbours edges={upstream} other={(e) => e.upstream} go={go} label="Upstream stacks" empty="Reads no other stack." />
                  <h3>Downstream</h3>
                  <Neighbours edges={downstream} other={(e) => e.downstream} go={go} label="Downstream stacks" empty="No stack reads its outputs." />
                </>
              )}
            </div>
          </Card>
        </div>
      )}
    </div>
  );
}

function Neighbours({ edges, other, go, label, empty }: { edges: Edge[]; other: (e: Edge) => string; go: (stack: string) => void; label: string; empty: string }) {
  if (edges.length === 0) return <p className="muted small">{empty}</p>;
  return (
    <ul className="neighbour-list" aria-label={label}>
      {edges.map((e) => (
        <li key={other(e)}>
          <button type="button" className="btn small" data-neighbour={other(e)} onClick={() => go(other(e))}>
            {other(e)}
          </button>{" "}
          <span className="muted small mono">{reads(e.outputs)}</span>
        </li>
      ))}
    </ul>
  );
}

/** A stack's Dependencies tab: the stacks whose outputs it reads, and those that read its outputs. */
export function StackDependenciesPage() {
  const { org = "", slug = "" } = useParams();
  const { data, error, loading } = useApiQuery(StackDependenciesDocument, { org, slug });
  const stack = data?.organization?.stack;
  usePageTitle("Dependencies", stack ? stack.name || stack.slug : slug, "Stacks");
  if (!data && loading) return <Loading what="the stack's dependencies" />;
  if (error && !data) return <ErrorBox error={error} />;
  if (!stack) return <NotFoundPage title={`There is no stack '${slug}'.`} />;
  const rows = (items: { stack: string; outputs: Mapping[] }[], empty: string, testId: string) =>
    items.length === 0 ? (
      <p className="muted" data-testid={testId}>
        {empty}
      </p>
    ) : (
      <ul className="neighbour-list" data-testid={testId}>
        {items.map((d) => (
          <li key={d.stack}>
            <Link to={`/orgs/${org}/stacks/${d.stack}/dependencies`}>{d.stack}</Link> <span className="muted small mono">{reads(d.outputs)}</span>
          </li>
        ))}
      </ul>
    );
  return (
    <div className="page">
      <StackHeader org={org} slug={slug} folder={stack.folder?.path} title={stack.name || stack.slug} />
      <Card title="Upstream: the stacks it reads">{rows(stack.dependencies.dependsOn, "Reads no other stack.", "upstream")}</Card>
      <Card title="Downstream: the stacks that read it">{rows(stack.dependencies.dependents, "No stack reads its outputs.", "downstream")}</Card>
    </div>
  );
}
