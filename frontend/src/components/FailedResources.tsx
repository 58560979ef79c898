import type { RunDetailFragment } from "../graphql/generated";
import { plural } from "../format";

/**
 * An apply's failed resources, counted and named at the top of the run page (each one's
 * Terraform error is on its row in Changes). The server keeps the first 100 addresses.
 */
export function FailedResourcesBox({ run }: { org: string; run: RunDetailFragment }) {
  const { count, addresses } = run.failedResources;
  if (count === 0) return null;
  const more = count - addresses.length;
  return (
    <section className="alert alert-danger failed-resources" aria-label="Failed resources" data-testid="failed-resources">
      <strong data-testid="failed-count">{plural(count, "resource")} failed to apply.</strong> Each one's error is shown on its
      row below; the resources that depend on them were not applied.
      <ul className="mono small">
        {addresses.map((address) => (
          <li key={address}>{address}</li>
        ))}
        {more > 0 && <li className="muted">and {more.toLocaleString()} more</li>}
      </ul>
    </section>
  );
}
