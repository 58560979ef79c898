import { Navigate, Route, Routes } from "react-router";
import { useAuth } from "./auth";
import { OrgLayout } from "./components/Layout";
import { Empty, ErrorBox, Loading, NotFoundPage, usePageTitle } from "./components/ui";
import { SignInPage } from "./pages/SignIn";
import { StacksPage } from "./pages/Stacks";
import { StackPage } from "./pages/Stack";
import { StackStatePage } from "./pages/StackState";
import { RunPage } from "./pages/Run";
import { GitDeliveriesPage } from "./pages/GitDeliveries";
import { AuditPage } from "./pages/Audit";
import { FolderSettingsPage, OrgSettingsPage, StackSettingsPage } from "./pages/Settings";
import { DriftPage, StackDriftPage } from "./pages/Drift";
import { NotificationsPage } from "./pages/Notifications";
import { MembersPage } from "./pages/Members";
import { TokensPage } from "./pages/Tokens";

export function App() {
  const { token } = useAuth();
  if (!token) return <SignInPage />;
  return (
    <Routes>
      <Route path="/" element={<Home />} />
      <Route path="/orgs/:org" element={<OrgLayout />}>
        <Route index element={<Navigate to="stacks" replace />} />
        <Route path="stacks" element={<StacksPage />} />
        <Route path="stacks/:slug" element={<StackPage />} />
        <Route path="stacks/:slug/settings" element={<StackSettingsPage />} />
        <Route path="stacks/:slug/state" element={<StackStatePage />} />
        <Route path="stacks/:slug/drift" element={<StackDriftPage />} />
        <Route path="drift" element={<DriftPage />} />
        <Route path="notifications" element={<NotificationsPage />} />
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
        <Empty title="Your token belongs to no organization.">
          Ask an administrator to add you: <code>firstlume token create --org &lt;slug&gt; --user {viewer.email}</code>
        </Empty>
      </main>
    );
  }
  return <Navigate to={`/orgs/${first.slug}/stacks`} replace />;
}
