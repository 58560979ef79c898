import { Suspense, useEffect, useRef, useState } from "react";
import { Link, NavLink, Outlet, useLocation, useNavigate, useParams } from "react-router";
import { useAuth } from "../auth";
import { ActiveRunsDrawerButton, ActiveRunsPanel, ActiveRunsProvider, useActiveRuns } from "./ActiveRuns";
import { ErrorBox, Loading, NotFoundPage } from "./ui";
import { useScrollRestoration } from "./ScrollRestoration";

/**
 * The signed-in shell of an organization: the top bar, the page, and the active runs (a panel
 * beside the page on wide screens, a drawer behind a header button on narrow ones). An
 * organization the viewer is not a member of is a not-found page: no live panel, no buttons.
 */
export function OrgLayout() {
  const { org = "" } = useParams();
  const { viewer, notice } = useAuth();
  useScrollRestoration();
  if (!viewer) {
    return <div className="center-page">{notice ? <ErrorBox error={notice} /> : <Loading what="your organizations" />}</div>;
  }
  if (!viewer.organizations.some((o) => o.slug === org)) {
    return (
      <div className="shell">
        <TopBar org={null} />
        <div className="body">
          <main className="main" id="main">
            <NotFoundPage title={`There is no organization “${org}” that you are a member of.`} />
          </main>
        </div>
      </div>
    );
  }
  return (
    <ActiveRunsProvider org={org}>
      <div className="shell">
        <TopBar org={org} />
        <div className="body">
          <main className="main" id="main">
            <Suspense fallback={<Loading what="the page" />}>
              <Outlet />
            </Suspense>
          </main>
          <ActiveRunsPanel />
        </div>
      </div>
    </ActiveRunsProvider>
  );
}

function TopBar({ org }: { org: string | null }) {
  const { viewer } = useAuth();
  const navigate = useNavigate();
  const home = org ? `/orgs/${org}/stacks` : "/";
  return (
    <header className="topbar">
      <a href="#main" className="skip-link">
        Skip to the page
      </a>
      <Link to={home} className="brand" title="Your stacks">
        <span className="logo" aria-hidden="true">
          F
        </span>
        <span className="brand-name">Firstlume</span>
      </Link>
      {org &&
        (viewer && viewer.organizations.length > 1 ? (
          <select className="org-switch" aria-label="Organization" value={org} onChange={(e) => navigate(`/orgs/${e.target.value}/stacks`)}>
            {viewer.organizations.map((o) => (
              <option key={o.slug} value={o.slug}>
                {o.name || o.slug}
              </option>
            ))}
          </select>
        ) : (
          <span className="org-name" title={`Organization ${org}`}>
            {org}
          </span>
        ))}
      {org && (
        <nav className="top-nav" aria-label="Main">
          <NavLink to={`/orgs/${org}/stacks`}>Stacks</NavLink>
          <NavLink to={`/orgs/${org}/git`}>Git deliveries</NavLink>
          <NavLink to={`/orgs/${org}/drift`}>Drift</NavLink>
          <NavLink to={`/orgs/${org}/dependencies`}>Dependencies</NavLink>
          <NavLink to={`/orgs/${org}/notifications`}>Notifications</NavLink>
          <NavLink to={`/orgs/${org}/policies`}>Policies</NavLink>
          <NavLink to={`/orgs/${org}/settings`}>Settings</NavLink>
          <NavLink to={`/orgs/${org}/members`}>Members</NavLink>
          <NavLink to={`/orgs/${org}/tokens`}>Tokens</NavLink>
          <NavLink to={`/orgs/${org}/audit`}>Audit</NavLink>
        </nav>
      )}
      <div className="spacer" />
      {org && <ApprovalShortcut org={org} />}
      {org && <ActiveRunsDrawerButton />}
      <AccountMenu org={org} />
    </header>
  );
}

function ApprovalShortcut({ org }: { org: string }) {
  const { runs } = useActiveRuns();
  // Only the runs this viewer may approve (the server decides: role, approvers, self-approval).
  const waiting = runs.filter((r) => r.awaitingApproval && r.approval.viewerCanApprove);
  if (waiting.length === 0) return null;
  return (
    <Link
      to={`/orgs/${org}/runs/${waiting[0].id}`}
      className="pill attention strong approval-shortcut"
      data-testid="approval-shortcut"
      title="Review the oldest run awaiting approval that you may approve"
    >
      {waiting.length} awaiting approval
    </Link>
  );
}

/** Who is signed in and the way out; on narrow screens also the navigation, in a menu. */
function AccountMenu({ org }: { org: string | null }) {
  const { viewer, signOut } = useAuth();
  const menu = useRef<HTMLDivElement>(null);
  const [open, setOpen] = useState(false);
  const location = useLocation();
  useEffect(() => {
    if (menu.current?.matches(":popover-open")) menu.current.hidePopover();
  }, [location.pathname]);
  return (
    <>
      <span className="who">{viewer?.email}</span>
      <button className="btn ghost small sign-out" onClick={() => signOut()}>
        Sign out
      </button>
      <button type="button" className="btn ghost small menu-button" popoverTarget="account-menu" aria-label="Menu">
        <span aria-hidden="true">☰</span>
      </button>
      <div
        id="account-menu"
        popover="auto"
        ref={menu}
        className="menu-popover"
        onToggle={(event) => setOpen((event.nativeEvent as ToggleEvent).newState === "open")}
      >
        {/* Only while open: its words would otherwise be in the page twice. */}
        {open && (
          <>
            {org && (
              <nav aria-label="Main (menu)">
                <NavLink to={`/orgs/${org}/stacks`}>Stacks</NavLink>
                <NavLink to={`/orgs/${org}/git`}>Git deliveries</NavLink>
                <NavLink to={`/orgs/${org}/drift`}>Drift</NavLink>
                <NavLink to={`/orgs/${org}/dependencies`}>Dependencies</NavLink>
                <NavLink to={`/orgs/${org}/notifications`}>Notifications</NavLink>
                <NavLink to={`/orgs/${org}/policies`}>Policies</NavLink>
                <NavLink to={`/orgs/${org}/settings`}>Settings</NavLink>
                <NavLink to={`/orgs/${org}/members`}>Members</NavLink>
                <NavLink to={`/orgs/${org}/tokens`}>Tokens</NavLink>
                <NavLink to={`/orgs/${org}/audit`}>Audit</NavLink>
              </nav>
            )}
            <div className="menu-who">{viewer?.email}</div>
            <button className="btn small" onClick={() => signOut()}>
              Sign out
            </button>
          </>
        )}
      </div>
    </>
  );
}
