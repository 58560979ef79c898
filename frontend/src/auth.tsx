import { createContext, useCallback, useContext, useEffect, useMemo, useState, type ReactNode } from "react";
import { ApiError, closeSockets, onUnauthenticated, request, storeToken, storedToken } from "./api/client";
import { ViewerDocument, type ViewerQuery } from "./graphql/generated";

type Viewer = ViewerQuery["viewer"];

type Auth = {
  token: string | null;
  viewer: Viewer | null;
  /** Why the last session ended, when the server ended it. */
  notice: string | null;
  signIn: (token: string) => Promise<void>;
  signOut: (notice?: string) => void;
};

const AuthContext = createContext<Auth | null>(null);

export function AuthProvider({ children }: { children: ReactNode }) {
  const [token, setToken] = useState<string | null>(storedToken);
  const [viewer, setViewer] = useState<Viewer | null>(null);
  const [notice, setNotice] = useState<string | null>(null);

  const signOut = useCallback((why?: string) => {
    storeToken(null);
    closeSockets();
    setToken(null);
    setViewer(null);
    setNotice(why ?? null);
  }, []);

  const signIn = useCallback(async (candidate: string) => {
    const trimmed = candidate.trim();
    if (!trimmed) throw new ApiError("invalid_input", "Paste an API token first.");
    const data = await request(ViewerDocument, {}, trimmed);
    storeToken(trimmed);
    setNotice(null);
    setViewer(data.viewer);
    setToken(trimmed);
  }, []);

  useEffect(
    () => onUnauthenticated(() => signOut("The server no longer accepts your API token. Sign in again.")),
    [signOut],
  );

  // A token kept from an earlier visit: learn who it belongs to.
  useEffect(() => {
    if (!token || viewer) return;
    let live = true;
    request(ViewerDocument, {}, token).then(
      (data) => live && setViewer(data.viewer),
      (error: ApiError) => live && error.code !== "unauthenticated" && setNotice(error.message),
    );
    return () => {
      live = false;
    };
  }, [token, viewer]);

  const value = useMemo(() => ({ token, viewer, notice, signIn, signOut }), [token, viewer, notice, signIn, signOut]);
  return <AuthContext.Provider value={value}>{children}</AuthContext.Provider>;
}

export function useAuth(): Auth {
  const auth = useContext(AuthContext);
  if (!auth) throw new Error("useAuth outside AuthProvider");
  return auth;
}

/** The signed-in token; the screens that call this are only rendered when there is one. */
export function useToken(): string {
  const { token } = useAuth();
  if (!token) throw new Error("useToken while signed out");
  return token;
}
