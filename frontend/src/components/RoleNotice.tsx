import type { ApiError } from "../api/client";

/**
 * What a page shows instead of an error when the viewer's role may not read what it lists (the
 * server's permission table decides; its refusal says which role is needed): a notice, not a
 * failure, so a reader can walk every page of the app.
 */
export function RoleNotice({ error, children }: { error: ApiError; children: string }) {
  return (
    <div className="alert alert-info" role="status" data-testid="role-notice">
      <strong>{children}</strong> {error.message}
    </div>
  );
}

/** True when the error is the server's refusal for the viewer's role. */
export function isRoleRefusal(error: ApiError | null | undefined): error is ApiError {
  return error?.code === "forbidden";
}
