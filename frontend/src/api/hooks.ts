import { useCallback, useEffect, useRef, useState } from "react";
import { useToken } from "../auth";
import type { Doc } from "../graphql/generated";
import { ApiError, request, subscribe } from "./client";

export type QueryState<R> = {
  data: R | undefined;
  error: ApiError | null;
  loading: boolean;
  refetch: () => Promise<void>;
};

/**
 * A query, read again whenever its variables or `refreshKey` change. The last data stays on
 * screen while a new read is in flight, so live refreshes never flash a loading state.
 */
export function useQuery<R, V>(doc: Doc<R, V>, variables: V, refreshKey: unknown = null): QueryState<R> {
  const token = useToken();
  const [data, setData] = useState<R | undefined>(undefined);
  const [error, setError] = useState<ApiError | null>(null);
  const [loading, setLoading] = useState(true);
  const key = JSON.stringify(variables);
  const latest = useRef(0);
  const varsRef = useRef(variables);
  varsRef.current = variables;

  const refetch = useCallback(async () => {
    const ticket = ++latest.current;
    setLoading(true);
    try {
      const result = await request(doc, varsRef.current, token);
      if (ticket === latest.current) {
        setData(result);
        setError(null);
      }
    } catch (caught) {
      if (ticket === latest.current) setError(caught as ApiError);
    } finally {
      if (ticket === latest.current) setLoading(false);
    }
  }, [doc, token]);

  // Other variables mean other data: don't show the previous page's data under the new key.
  const shownKey = useRef(key);
  if (shownKey.current !== key) {
    shownKey.current = key;
    if (data !== undefined) setData(undefined);
  }

  useEffect(() => {
    void refetch();
  }, [refetch, key, refreshKey]);

  return { data, error, loading, refetch };
}

export type SubscriptionState = {
  error: ApiError | null;
  /** True from the first message until it completes or breaks. */
  live: boolean;
  completed: boolean;
};

/**
 * A subscription while `variables` is not null. When the connection breaks it subscribes again,
 * with `resume()`'s variables when given (a log continues from its offset), after a short wait.
 */
export function useSubscription<R, V>(
  doc: Doc<R, V>,
  variables: V | null,
  handlers: { next: (data: R) => void; complete?: () => void; resume?: () => V },
): SubscriptionState {
  const token = useToken();
  const [state, setState] = useState<SubscriptionState>({ error: null, live: false, completed: false });
  const handlersRef = useRef(handlers);
  handlersRef.current = handlers;
  const key = variables === null ? null : JSON.stringify(variables);

  useEffect(() => {
    if (key === null) return;
    let stop: (() => void) | null = null;
    let timer: number | undefined;
    let attempt = 0;
    let disposed = false;
    setState({ error: null, live: false, completed: false });

    const start = (vars: V) => {
      stop = subscribe(doc, vars, token, {
        next: (data) => {
          attempt = 0;
          setState((s) => (s.live && !s.error ? s : { error: null, live: true, completed: false }));
          handlersRef.current.next(data);
        },
        error: (error, retry) => {
          setState({ error, live: false, completed: false });
          if (retry && !disposed) {
            const wait = Math.min(10_000, 500 * 2 ** attempt++);
            timer = window.setTimeout(() => {
              const again = handlersRef.current.resume?.() ?? (JSON.parse(key) as V);
              start(again);
            }, wait);
          }
        },
        complete: () => {
          setState({ error: null, live: false, completed: true });
          handlersRef.current.complete?.();
        },
      });
    };
    start(JSON.parse(key) as V);
    return () => {
      disposed = true;
      window.clearTimeout(timer);
      stop?.();
    };
  }, [doc, token, key]);

  return state;
}

/**
 * What a button does: `busy` while it runs, and `error` in words when it fails. The action
 * returns an error message for an expected failure (a mutation's error type), or nothing.
 */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = useCallback(async (action: () => Promise<string | void>) => {
    setBusy(true);
    setError(null);
    try {
      const failure = await action();
      if (failure) setError(failure);
    } catch (caught) {
      setError(caught instanceof ApiError ? caught.message : String(caught));
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, setError, run };
}
