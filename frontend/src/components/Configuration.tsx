import type { RunDetailFragment } from "../graphql/generated";
import { originLabel } from "../format";
import { Card } from "./ui";

export function ConfigurationView({ run }: { run: RunDetailFragment }) {
  const { configuration, stateBackends } = run;
  const settings = configuration.settings;
  return (
    <div className="config-grid">
      <Card title="Effective settings">
        {settings ? (
          <table className="table compact">
            <tbody>
              <tr>
                <th>require_approval</th>
                <td>{settings.requireApproval.value ? "on" : "off"}</td>
                <td className="muted">from {originLabel(settings.requireApproval.origin)}</td>
              </tr>
              <tr>
                <th>confirm_destructive</th>
                <td>{settings.confirmDestructive.value ? "on" : "off"}</td>
                <td className="muted">from {originLabel(settings.confirmDestructive.origin)}</td>
              </tr>
            </tbody>
          </table>
        ) : (
          <p className="muted pad">
            {run.type === "PLAN" || run.type === "DRIFT"
              ? "A plan-only run reads no approval rules."
              : "Read when the plan finishes."}
          </p>
        )}
        <p className="muted small pad">Engine: {configuration.engine ?? "—"}</p>
      </Card>
      <Card title="State backends">
        {stateBackends.length === 0 ? (
          <p className="muted pad">Known after init.</p>
        ) : (
          <table className="table compact">
            <thead>
              <tr>
                <th>Unit</th>
                <th>Backend</th>
              </tr>
            </thead>
            <tbody>
              {stateBackends.map((b) => (
                <tr key={b.unit}>
                  <td className="mono">{b.unit}</td>
                  <td className="mono">{b.backend}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Card>
      <Card title="Variables" className="wide">
        {configuration.variables.length === 0 ? (
          <p className="muted pad">The plan used no variables.</p>
        ) : (
          <table className="table compact responsive">
            <thead>
              <tr>
                <th>Name</th>
                <th>Kind</th>
                <th>Origin</th>
                <th>Value</th>
              </tr>
            </thead>
            <tbody>
              {configuration.variables.map((v) => (
                <tr key={`${v.kind}:${v.name}`}>
                  <td className="mono" data-label="Name">{v.name}</td>
                  <td data-label="Kind">{v.kind === "ENV" ? "environment" : "terraform"}</td>
                  <td data-label="Origin">{originLabel(v.origin)}</td>
                  <td className="muted" data-label="Value">{v.sensitive ? "secret, hidden" : "—"}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        <p className="muted small pad">A run shows variable names and origins, never values.</p>
      </Card>
      <Card title="config.yaml" className="wide">
        {configuration.configYaml ? (
          <pre className="code" tabIndex={0} aria-label="config.yaml">{configuration.configYaml}</pre>
        ) : (
          <p className="muted pad">{run.commit ? "The commit has no config.yaml for this stack." : "Read from the commit at checkout."}</p>
        )}
      </Card>
    </div>
  );
}
