import { createContext, useCallback, useContext, useEffect, useMemo, useRef, useState, type ReactNode } from "react";
import { Provider } from "urql";
import {
  ApiError,
  apiError,
  createApiClient,
  currentSession,
  endSession,
  isSession,
  storeToken,
  storedToken,
  type ApiClient,
} from "./api/client";
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

async function viewerOf(api: ApiClient): Promise<Viewer> {
  const result = await api.client.query(ViewerDocument, {}, { requestPolicy: "network-only" }).toPromise();
  if (result.error) throw apiError(result.error);
  if (!result.data) throw new ApiError("unexpected", "The server answered without data. Try again.");
  return result.data.viewer;
}

/** The token, who it belongs to, and one API client (with its cache and socket) per token. */
export function AuthProvider({ children }: { children: ReactNode }) {
  const [token, setToken] = useState<string | null>(storedToken);
  const [viewer, setViewer] = useState<Viewer | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  // Without a stored token, whether this browser has a single sign-on session is asked once.
  const [asking, setAsking] = useState(() => storedToken() === null);

  useEffect(() => {
    if (!asking) return;
    let live = true;
    currentSession().then((session) => {
      if (!live) return;
      if (session) setToken(session);
      setAsking(false);
    });
    return () => {
      live = false;
    };
  }, [asking]);

  const signOut = useCallback(
    (why?: string) => {
      if (token && isSession(token)) void endSession(token);
      storeToken(null);
      setToken(null);
      setViewer(null);
      setNotice(why ?? null);
    },
    [token],
  );
  const refused = useRef(() => signOut("The server no longer accepts your API token. Sign in again."));
  refused.current = () =>
    signOut(
      token && isSession(token)
        ? "Your session has ended. Sign in again."
        : "The server no longer accepts your API token. Sign in again.",
    );

  const api = useMemo(() => (token ? createApiClient(token, () => refused.current()) : null), [token]);
  useEffect(() => () => api?.dispose(), [api]);

  const signIn = useCallback(async (candidate: string) => {
    const trimmed = candidate.trim();
    if (!trimmed) throw new ApiError("invalid_input", "Paste an API token first.");
    const probe = createApiClient(trimmed);
    try {
      const who = await viewerOf(probe);
      storeToken(trimmed);
      setNotice(null);
      setViewer(who);
      setToken(trimmed);
    } finally {
      probe.dispose();
    }
  }, []);

  // A token kept from an earlier visit: learn who it belongs to.
  useEffect(() => {
    if (!api || viewer) return;
    let live = true;
    viewerOf(api).then(
      (who) => live && setViewer(who),
      (error: ApiError) => live && error.code !== "unauthenticated" && setNotice(error.message),
    );
    return () => {
      live = false;
    };
  }, [api, viewer]);

  const value = useMemo(() => ({ token, viewer, notice, signIn, signOut }), [token, viewer, notice, signIn, signOut]);
  if (asking) return null;
  return (
    <AuthContext.Provider value={value}>
      {api ? <Provider value={api.client}>{children}</Provider> : children}
    </AuthContext.Provider>
  );
}

export function useAuth(): Auth {
  const auth = useContext(AuthContext);
  if (!auth) throw new Error("useAuth outside AuthProvider");
  return auth;
}

/** The signed-in token (for the REST routes, such as a log's download); only rendered signed in. */
export function useToken(): string {
  const { token } = useAuth();
  if (!token) throw new Error("useToken while signed out");
  return token;
}
