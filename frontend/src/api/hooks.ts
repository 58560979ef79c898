import { useCallback, useEffect, useRef, useState } from "react";
import { CombinedError, useClient, useQuery, type AnyVariables, type Client, type TypedDocumentNode } from "urql";
import { onEnd, pipe, subscribe } from "wonka";
import { ApiError, apiError } from "./client";

export type QueryState<R> = {
  data: R | undefined;
  error: ApiError | null;
  loading: boolean;
  /** Reads again from the server; resolves once the cache (and so the screen) has the answer. */
  refetch: () => Promise<void>;
  /** The server's refusal of each `optional` field (by field name) the viewer may not read. */
  refused: Record<string, string>;
};

/**
 * Splits a query's errors: those on an `optional` field (a nullable field that the permission
 * table may refuse to a role, e.g. a state's outputs to a reader) become per-field refusals the
 * page explains in place; any other error stays an error of the page.
 */
function splitRefusals(error: CombinedError | undefined, optional: readonly string[]): { error: ApiError | null; refused: Record<string, string> } {
  if (!error) return { error: null, refused: {} };
  const refused: Record<string, string> = {};
  const rest = error.graphQLErrors.filter((e) => {
    const field = e.path?.[e.path.length - 1];
    if (typeof field === "string" && optional.includes(field) && e.extensions?.code === "forbidden") {
      refused[field] = e.message;
      return false;
    }
    return true;
  });
  if (rest.length === error.graphQLErrors.length) return { error: apiError(error), refused };
  if (rest.length === 0 && !error.networkError) return { error: null, refused };
  return { error: apiError(new CombinedError({ graphQLErrors: rest, networkError: error.networkError, response: error.response })), refused };
}

/**
 * A query through the normalized cache: what the cache has shows at once, and the server is
 * asked too. When `refreshKey` changes it is read again from the server; the last data stays on
 * screen meanwhile, so live refreshes never flash a loading state.
 */
export function useApiQuery<R, V extends AnyVariables>(
  doc: TypedDocumentNode<R, V>,
  variables: V,
  options: { refreshKey?: unknown; pause?: boolean; optional?: readonly string[] } = {},
): QueryState<R> {
  const client = useClient();
  const [result, reexecute] = useQuery<R, V>({
    query: doc,
    variables,
    requestPolicy: "cache-and-network",
    pause: options.pause,
  } as Parameters<typeof useQuery<R, V>>[0]);

  const refreshKey = options.refreshKey ?? null;
  const seenKey = useRef(refreshKey);
  useEffect(() => {
    if (seenKey.current === refreshKey) return;
    seenKey.current = refreshKey;
    reexecute({ requestPolicy: "network-only" });
  }, [refreshKey, reexecute]);

  const variablesRef = useRef(variables);
  variablesRef.current = variables;
  const refetch = useCallback(async () => {
    await client.query(doc, variablesRef.current, { requestPolicy: "network-only" }).toPromise();
  }, [client, doc]);

  const { error, refused } = splitRefusals(result.error, options.optional ?? []);
  return {
    data: result.data ?? undefined,
    error,
    loading: result.fetching,
    refetch,
    refused,
  };
}

/** A mutation as a promise of its data; a failed request rejects with an ApiError in words. */
export function useMutate() {
  const client = useClient();
  return useCallback(
    async <R, V extends AnyVariables>(doc: TypedDocumentNode<R, V>, variables: V): Promise<R> => {
      const result = await client.mutation(doc, variables).toPromise();
      if (result.error) throw apiError(result.error);
      if (!result.data) throw new ApiError("unexpected", "The server answered without data. Try again.");
      return result.data;
    },
    [client],
  );
}

export type SubscriptionState = {
  error: ApiError | null;
  /** True from the first message until it completes or breaks. */
  live: boolean;
  completed: boolean;
};

type LiveHandlers<R, V> = {
  next: (data: R) => void;
  /** The server ended the subscription (the run or step finished). */
  complete?: () => void;
  /** Variables to subscribe again with after a broken connection (a log's offset). */
  resume?: () => V;
  state?: (state: SubscriptionState) => void;
};

/**
 * Subscribes through the client (its results also update the normalized cache). When the
 * connection breaks it subscribes again, with `resume()`'s variables when given, after a wait
 * that grows with each failure. Returns the function that stops it.
 */
export function liveSubscription<R, V extends AnyVariables>(
  client: Client,
  doc: TypedDocumentNode<R, V>,
  variables: V,
  handlers: LiveHandlers<R, V>,
): () => void {
  let stop: (() => void) | null = null;
  let timer: number | undefined;
  let attempt = 0;
  let disposed = false;
  let live = false;
  const report = (state: SubscriptionState) => handlers.state?.(state);

  const start = (vars: V) => {
    let failed = false;
    const { unsubscribe } = pipe(
      client.subscription(doc, vars),
      onEnd(() => {
        if (disposed || failed) return;
        live = false;
        report({ error: null, live: false, completed: true });
        handlers.complete?.();
      }),
      subscribe((result) => {
        if (result.error) {
          failed = true;
          live = false;
          const error = apiError(result.error);
          report({ error, live: false, completed: false });
          stop?.();
          // The connection broke, not the operation: subscribing again may work.
          if (error.code === "network" && !disposed) {
            const wait = Math.min(10_000, 500 * 2 ** attempt++);
            timer = window.setTimeout(() => start(handlers.resume?.() ?? variables), wait);
          }
          return;
        }
        if (result.data) {
          attempt = 0;
          if (!live) {
            live = true;
            report({ error: null, live: true, completed: false });
          }
          handlers.next(result.data);
        }
      }),
    );
    stop = unsubscribe;
  };
  report({ error: null, live: false, completed: false });
  start(variables);
  return () => {
    disposed = true;
    window.clearTimeout(timer);
    stop?.();
  };
}

/** A subscription while `variables` is not null (see liveSubscription). */
export function useLiveSubscription<R, V extends AnyVariables>(
  doc: TypedDocumentNode<R, V>,
  variables: V | null,
  handlers: Omit<LiveHandlers<R, V>, "state">,
): SubscriptionState {
  const client = useClient();
  const [state, setState] = useState<SubscriptionState>({ error: null, live: false, completed: false });
  const handlersRef = useRef(handlers);
  handlersRef.current = handlers;
  const key = variables === null ? null : JSON.stringify(variables);

  useEffect(() => {
    if (key === null) return;
    return liveSubscription(client, doc, JSON.parse(key) as V, {
      next: (data) => handlersRef.current.next(data),
      complete: () => handlersRef.current.complete?.(),
      resume: () => handlersRef.current.resume?.() ?? (JSON.parse(key) as V),
      state: setState,
    });
  }, [client, doc, key]);

  return state;
}

/**
 * What a button does: `busy` while it runs, and `error` in words when it fails. The action
 * returns an error message for an expected failure (a mutation's error type), or nothing.
 */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  // True once the last action succeeded (a form's "Saved"), until the next one starts.
  const [done, setDone] = useState(false);
  const run = useCallback(async (action: () => Promise<string | void>) => {
    setBusy(true);
    setError(null);
    setDone(false);
    try {
      const failure = await action();
      if (failure) setError(failure);
      else setDone(true);
    } catch (caught) {
      setError(caught instanceof ApiError ? caught.message : String(caught));
    } finally {
      setBusy(false);
    }
  }, []);
  const reset = useCallback(() => setDone(false), []);
  return { busy, error, setError, run, done, reset };
}
