import { lazy, Suspense } from "react";
import { Navigate, Route, Routes } from "react-router";
import { useAuth } from "./auth";
import { OrgLayout } from "./components/Layout";
import { Empty, ErrorBox, Loading, NotFoundPage, usePageTitle } from "./components/ui";
import { SignInPage } from "./pages/SignIn";

// Each screen is its own chunk, loaded when a route first shows it: the entry holds the shell
// (router, client, cache, layout), so the first screen does not wait for every other one.
const StacksPage = lazy(() => import("./pages/Stacks").then((m) => ({ default: m.StacksPage })));
const StackPage = lazy(() => import("./pages/Stack").then((m) => ({ default: m.StackPage })));
const StackStatePage = lazy(() => import("./pages/StackState").then((m) => ({ default: m.StackStatePage })));
const StackPullRequestsPage = lazy(() =>
  import("./pages/StackPullRequests").then((m) => ({ default: m.StackPullRequestsPage })),
);
const RunPage = lazy(() => import("./pages/Run").then((m) => ({ default: m.RunPage })));
const GitDeliveriesPage = lazy(() => import("./pages/GitDeliveries").then((m) => ({ default: m.GitDeliveriesPage })));
const AuditPage = lazy(() => import("./pages/Audit").then((m) => ({ default: m.AuditPage })));
const OrgSettingsPage = lazy(() => import("./pages/Settings").then((m) => ({ default: m.OrgSettingsPage })));
const FolderSettingsPage = lazy(() => import("./pages/Settings").then((m) => ({ default: m.FolderSettingsPage })));
const StackSettingsPage = lazy(() => import("./pages/Settings").then((m) => ({ default: m.StackSettingsPage })));
const DriftPage = lazy(() => import("./pages/Drift").then((m) => ({ default: m.DriftPage })));
const StackDriftPage = lazy(() => import("./pages/Drift").then((m) => ({ default: m.StackDriftPage })));
const DependenciesPage = lazy(() => import("./pages/Dependencies").then((m) => ({ default: m.DependenciesPage })));
const StackDependenciesPage = lazy(() => import("./pages/Dependencies").then((m) => ({ default: m.StackDependenciesPage })));
const NotificationsPage = lazy(() => import("./pages/Notifications").then((m) => ({ default: m.NotificationsPage })));
const PoliciesPage = lazy(() => import("./pages/Policies").then((m) => ({ default: m.PoliciesPage })));
const MembersPage = lazy(() => import("./pages/Members").then((m) => ({ default: m.MembersPage })));
const TokensPage = lazy(() => import("./pages/Tokens").then((m) => ({ default: m.TokensPage })));
const CliLoginPage = lazy(() => import("./pages/CliLogin").then((m) => ({ default: m.CliLoginPage })));

export function App() {
  const { token } = useAuth();
  if (!token) return <SignInPage />;
  return (
    <Routes>
      <Route path="/" element={<Home />} />
      <Route
        path="/cli-login"
        element={
          <Suspense fallback={<Loading what="the page" />}>
            <CliLoginPage />
          </Suspense>
        }
      />
      <Route path="/orgs/:org" element={<OrgLayout />}>
        <Route index element={<Navigate to="stacks" replace />} />
        <Route path="stacks" element={<StacksPage />} />
        <Route path="stacks/:slug" element={<StackPage />} />
        <Route path="stacks/:slug/settings" element={<StackSettingsPage />} />
        <Route path="stacks/:slug/state" element={<StackStatePage />} />
        <Route path="stacks/:slug/pull-requests" element={<StackPullRequestsPage />} />
        <Route path="stacks/:slug/drift" element={<StackDriftPage />} />
        <Route path="drift" element={<DriftPage />} />
        <Route path="dependencies" element={<DependenciesPage />} />
        <Route path="stacks/:slug/dependencies" element={<StackDependenciesPage />} />
        <Route path="notifications" element={<NotificationsPage />} />
        <Route path="policies" element={<PoliciesPage />} />
        <Route path="runs/:runId/*" element={<RunPage />} />
        <Route path="settings" element={<OrgSettingsPage />} />
        <Route path="git" element={<GitDeliveriesPage />} />
        <Route path="members" element={<MembersPage />} />
        <Route path="tokens" element={<TokensPage />} />
        <Route path="audit" element={<AuditPage />} />
        <Route path="folders/*" element={<FolderSettingsPage />} />
        <Route path="*" element={<NotFoundPage title="There is nothing at this address." />} />
      </Route>
      <Route path="*" element={<NotFoundPage title="There is nothing at this address." />} />
    </Routes>
  );
}

/** The first organization of the signed-in user. */
function Home() {
  const { viewer, notice } = useAuth();
  usePageTitle();
  if (notice) return <ErrorBox error={notice} />;
  if (!viewer) return <Loading what="your organizations" />;
  const first = viewer.organizations[0];
  if (!first) {
    return (
      <main className="center-page">
        <Empty title={`${viewer.email} belongs to no organization.`}>
          Ask an administrator to add you: <code>firstlume token create --org &lt;slug&gt; --user {viewer.email}</code>, or,
          with single sign-on, to map one of your directory groups to this organization.
        </Empty>
      </main>
    );
  }
  return <Navigate to={`/orgs/${first.slug}/stacks`} replace />;
}
