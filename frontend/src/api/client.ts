// The only code that talks to the server: one urql client per API token, GraphQL over HTTP for
// queries and mutations and graphql-transport-ws for subscriptions, through a normalized cache
// (api/cache.ts). Errors leave here as sentences a person can act on.
import { Client, fetchExchange, mapExchange, subscriptionExchange, type CombinedError } from "@urql/core";
import { createClient as createSocket } from "graphql-ws";
import { cacheExchange } from "./cache";

const TOKEN_KEY = "firstlume.token";

export function storedToken(): string | null {
  return window.localStorage.getItem(TOKEN_KEY);
}

export function storeToken(token: string | null): void {
  if (token) window.localStorage.setItem(TOKEN_KEY, token);
  else window.localStorage.removeItem(TOKEN_KEY);
}

// Signed in through single sign-on, the browser holds an HttpOnly session cookie that this code
// never sees: its credentials are then "session:<the session's CSRF token>", sent with every
// request as X-CSRF-Token (the server refuses a cookie-authenticated write without it).
const SESSION = "session:";

export function sessionCredentials(csrf: string): string {
  return SESSION + csrf;
}

export function isSession(credentials: string): boolean {
  return credentials.startsWith(SESSION);
}

/** The headers that authenticate a request: the API token, or the session's CSRF token. */
export function authHeaders(credentials: string): Record<string, string> {
  return isSession(credentials)
    ? { "x-csrf-token": credentials.slice(SESSION.length) }
    : { authorization: `Bearer ${credentials}` };
}

/** The session of this browser's cookie, if it has a live one: its credentials. */
export async function currentSession(): Promise<string | null> {
  try {
    const response = await fetch("/api/v1/session", { credentials: "same-origin" });
    if (!response.ok) return null;
    const body = (await response.json()) as { csrf_token?: string };
    return body.csrf_token ? sessionCredentials(body.csrf_token) : null;
  } catch {
    return null;
  }
}

/** Ends the browser's session on the server (the cookie stops working at once). */
export async function endSession(credentials: string): Promise<void> {
  try {
    await fetch("/api/v1/sso/logout", { method: "POST", credentials: "same-origin", headers: authHeaders(credentials) });
  } catch {
    // Offline: the cookie expires by itself; this browser forgets it now.
  }
}

export type SingleSignOn = { enabled: boolean; issuer: string | null; sign_in_url: string | null };

export async function singleSignOn(): Promise<SingleSignOn | null> {
  try {
    const response = await fetch("/api/v1/sso");
    return response.ok ? ((await response.json()) as SingleSignOn) : null;
  } catch {
    return null;
  }
}

export class ApiError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const MESSAGES: Record<string, string> = {
  unauthenticated: "Your API token was not accepted. It may have been revoked or mistyped: sign in again.",
  network: "Can't reach the Firstlume server. Check that it is running and that you are online.",
  unexpected: "Something went wrong on the server. Try again; if it keeps happening, look at the control plane's log.",
  too_complex: "That request was too large for the server. Narrow it down and try again.",
};

type GraphQLErrorShape = { message?: string; extensions?: { code?: unknown } | null };

function fromGraphQLErrors(errors: readonly GraphQLErrorShape[]): ApiError {
  const first = errors[0] ?? {};
  const code = typeof first.extensions?.code === "string" ? first.extensions.code : "unexpected";
  const message = first.message ?? "";
  if (code === "unauthenticated") return new ApiError(code, MESSAGES.unauthenticated);
  if (!message || message === "Unexpected error.") return new ApiError(code, MESSAGES.unexpected);
  if (/depth|aliases|tokens/i.test(message) && !first.extensions?.code) return new ApiError("too_complex", MESSAGES.too_complex);
  return new ApiError(code, message);
}

function closeCode(value: unknown): number | null {
  return typeof value === "object" && value !== null && typeof (value as { code?: unknown }).code === "number"
    ? (value as { code: number }).code
    : null;
}

/** What a failed operation means, in words. */
export function apiError(error: CombinedError): ApiError {
  if (error.graphQLErrors.length) return fromGraphQLErrors(error.graphQLErrors);
  const network: unknown = error.networkError;
  // A WebSocket the server closed because it refused the token (graphql-transport-ws: 4401/4403).
  const code = closeCode(network);
  if (code === 4401 || code === 4403) return new ApiError("unauthenticated", MESSAGES.unauthenticated);
  const status = (error.response as Response | undefined)?.status;
  if (status && status >= 400) {
    return new ApiError("http", `The server answered HTTP ${status} without a usable reply. Try again in a moment.`);
  }
  return new ApiError("network", MESSAGES.network);
}

export type ApiClient = { client: Client; dispose: () => void };

/**
 * A client for one token. `onUnauthenticated` is told when the server refuses the token, over
 * HTTP or WebSocket, so the app can sign out.
 */
export function createApiClient(token: string, onUnauthenticated: () => void = () => {}): ApiClient {
  const url = new URL("/graphql", window.location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  const socket = createSocket({
    url: url.toString(),
    // A session's socket is authenticated by its cookie, which the browser sends with it.
    connectionParams: isSession(token) ? {} : { authorization: `Bearer ${token}` },
    lazy: true,
    keepAlive: 20_000,
    // Resubscribing is ours (useLiveSubscription): a log resumes from its offset, not from 0.
    retryAttempts: 0,
    shouldRetry: () => false,
  });
  const client = new Client({
    url: "/graphql",
    fetchOptions: { credentials: "same-origin", headers: authHeaders(token) },
    preferGetMethod: false,
    exchanges: [
      mapExchange({
        onError(error) {
          if (apiError(error).code === "unauthenticated") onUnauthenticated();
        },
      }),
      cacheExchange,
      fetchExchange,
      subscriptionExchange({
        forwardSubscription(request) {
          const input = { ...request, query: request.query ?? "" };
          return {
            subscribe(sink) {
              const unsubscribe = socket.subscribe(input, sink);
              return { unsubscribe };
            },
          };
        },
      }),
    ],
  });
  return { client, dispose: () => void socket.dispose() };
}
