import { Link, NavLink, Outlet, useNavigate, useParams } from "react-router";
import { useAuth } from "../auth";
import { ActiveRunsPanel, ActiveRunsProvider, useActiveRuns } from "./ActiveRuns";

export function OrgLayout() {
  const { org = "" } = useParams();
  return (
    <ActiveRunsProvider org={org}>
      <div className="shell">
        <TopBar org={org} />
        <div className="body">
          <main className="main">
            <Outlet />
          </main>
          <ActiveRunsPanel />
        </div>
      </div>
    </ActiveRunsProvider>
  );
}

function TopBar({ org }: { org: string }) {
  const { viewer, signOut } = useAuth();
  const navigate = useNavigate();
  const { runs } = useActiveRuns();
  const waiting = runs.filter((r) => r.awaitingApproval);
  return (
    <header className="topbar">
      <Link to={`/orgs/${org}/stacks`} className="brand">
        <span className="logo">F</span> Firstlume
      </Link>
      {viewer && viewer.organizations.length > 1 ? (
        <select
          className="org-switch"
          aria-label="Organization"
          value={org}
          onChange={(e) => navigate(`/orgs/${e.target.value}/stacks`)}
        >
          {viewer.organizations.map((o) => (
            <option key={o.slug} value={o.slug}>
              {o.name || o.slug}
            </option>
          ))}
        </select>
      ) : (
        <span className="org-name">{org}</span>
      )}
      <nav>
        <NavLink to={`/orgs/${org}/stacks`}>Stacks</NavLink>
        <NavLink to={`/orgs/${org}/settings`}>Settings</NavLink>
      </nav>
      <div className="spacer" />
      {waiting.length > 0 && (
        <Link
          to={`/orgs/${org}/runs/${waiting[0].id}`}
          className="pill attention strong"
          data-testid="approval-shortcut"
          title="Review the oldest run awaiting approval"
        >
          {waiting.length} awaiting approval
        </Link>
      )}
      <span className="who">{viewer?.email}</span>
      <button className="btn ghost small" onClick={() => signOut()}>
        Sign out
      </button>
    </header>
  );
}
