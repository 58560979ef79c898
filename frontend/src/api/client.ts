// The only code that talks to the server: GraphQL over HTTP for queries and mutations, and
// graphql-transport-ws for subscriptions. Errors leave here as sentences a person can act on.
import { createClient, type Client } from "graphql-ws";
import type { Doc } from "../graphql/generated";

const TOKEN_KEY = "firstlume.token";

export function storedToken(): string | null {
  return window.localStorage.getItem(TOKEN_KEY);
}

export function storeToken(token: string | null): void {
  if (token) window.localStorage.setItem(TOKEN_KEY, token);
  else window.localStorage.removeItem(TOKEN_KEY);
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

type GraphQLErrorShape = { message?: string; extensions?: { code?: string } };

export function errorFrom(errors: GraphQLErrorShape[]): ApiError {
  const first = errors[0] ?? {};
  const code = first.extensions?.code ?? "unexpected";
  const message = first.message ?? "";
  if (code === "unauthenticated") return new ApiError(code, MESSAGES.unauthenticated);
  if (!message || message === "Unexpected error.") return new ApiError(code, MESSAGES.unexpected);
  if (/depth|aliases|tokens/i.test(message) && !first.extensions?.code) return new ApiError("too_complex", MESSAGES.too_complex);
  return new ApiError(code, message);
}

/** Listeners told when the server refuses the token, so the app can sign out. */
const unauthenticatedListeners = new Set<() => void>();
export function onUnauthenticated(listener: () => void): () => void {
  unauthenticatedListeners.add(listener);
  return () => unauthenticatedListeners.delete(listener);
}
function refused(error: ApiError): ApiError {
  if (error.code === "unauthenticated") unauthenticatedListeners.forEach((listener) => listener());
  return error;
}

export async function request<R, V>(doc: Doc<R, V>, variables: V, token: string): Promise<R> {
  let response: Response;
  try {
    response = await fetch("/graphql", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify({ query: doc, variables }),
    });
  } catch {
    throw new ApiError("network", MESSAGES.network);
  }
  let body: { data?: R | null; errors?: GraphQLErrorShape[] };
  try {
    body = await response.json();
  } catch {
    throw new ApiError(
      "http",
      `The server answered HTTP ${response.status} without a usable reply. Try again in a moment.`,
    );
  }
  if (body.errors?.length) throw refused(errorFrom(body.errors));
  if (!body.data) throw new ApiError("unexpected", MESSAGES.unexpected);
  return body.data;
}

// Subscriptions --------------------------------------------------------------------------------

let socket: { token: string; client: Client } | null = null;

function socketFor(token: string): Client {
  if (socket?.token !== token) {
    void socket?.client.dispose();
    const url = new URL("/graphql", window.location.href);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    socket = {
      token,
      client: createClient({
        url: url.toString(),
        connectionParams: { authorization: `Bearer ${token}` },
        lazy: true,
        keepAlive: 20_000,
        // Resubscribing is ours (useSubscription): a log resumes from its offset, not from 0.
        retryAttempts: 0,
        shouldRetry: () => false,
      }),
    };
  }
  return socket.client;
}

export function closeSockets(): void {
  void socket?.client.dispose();
  socket = null;
}

export type SubscriptionSink<R> = {
  next: (data: R) => void;
  /** `retry` is true when the connection broke (not the operation): subscribing again may work. */
  error: (error: ApiError, retry: boolean) => void;
  complete: () => void;
};

export function subscribe<R, V>(doc: Doc<R, V>, variables: V, token: string, sink: SubscriptionSink<R>): () => void {
  return socketFor(token).subscribe<R>(
    { query: doc, variables: variables as Record<string, unknown> },
    {
      next: (result) => {
        if (result.errors?.length) sink.error(refused(errorFrom(result.errors as GraphQLErrorShape[])), false);
        else if (result.data) sink.next(result.data);
      },
      error: (error: unknown) => {
        if (Array.isArray(error)) {
          sink.error(refused(errorFrom(error as GraphQLErrorShape[])), false);
        } else if (isCloseEvent(error) && (error.code === 4403 || error.code === 4401)) {
          sink.error(refused(new ApiError("unauthenticated", MESSAGES.unauthenticated)), false);
        } else {
          sink.error(new ApiError("network", MESSAGES.network), true);
        }
      },
      complete: sink.complete,
    },
  );
}

function isCloseEvent(value: unknown): value is { code: number } {
  return typeof value === "object" && value !== null && typeof (value as { code?: unknown }).code === "number";
}
