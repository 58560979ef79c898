import { useEffect, useMemo, useReducer, useRef } from "react";
import { useClient } from "urql";
import type { ApiError } from "../api/client";
import { liveSubscription, type SubscriptionState } from "../api/hooks";
import { RunLogDocument } from "../graphql/generated";
import { LogLines, type TextTime } from "./lines";

export type LogSection = {
  step: string;
  log: LogLines;
  /** Live while the step runs; completed once the server has sent all of it. */
  state: SubscriptionState;
};

type Follower = { section: LogSection; offset: number; pending: string; pendingTimes: TextTime[]; stop: () => void };

/**
 * The log of each of `steps`, live (one subscription per step that has started), as sections of
 * lines. Text is batched to one render per animation frame however fast it comes, and a broken
 * connection resumes each step from its offset: nothing missed or doubled.
 */
export function useRunLog(org: string, runId: string, steps: readonly string[]): { sections: LogSection[]; version: number; error: ApiError | null } {
  const client = useClient();
  const [version, bump] = useReducer((n: number) => n + 1, 0);
  const followers = useRef(new Map<string, Follower>());
  const frame = useRef<number | null>(null);
  const key = steps.join("\n");

  // Everything starts afresh for another run.
  useEffect(() => {
    const current = followers.current;
    return () => {
      for (const follower of current.values()) follower.stop();
      current.clear();
      if (frame.current !== null) cancelAnimationFrame(frame.current);
      frame.current = null;
    };
  }, [client, org, runId]);

  useEffect(() => {
    const flush = () => {
      frame.current = null;
      for (const follower of followers.current.values()) {
        if (follower.pending) {
          follower.section.log.append(follower.pending, follower.pendingTimes);
          follower.pending = "";
          follower.pendingTimes = [];
        }
      }
      bump();
    };
    const schedule = () => {
      if (frame.current === null) frame.current = requestAnimationFrame(flush);
    };
    for (const step of key ? key.split("\n") : []) {
      if (followers.current.has(step)) continue;
      const section: LogSection = { step, log: new LogLines(), state: { error: null, live: false, completed: false } };
      const follower: Follower = { section, offset: 0, pending: "", pendingTimes: [], stop: () => {} };
      followers.current.set(step, follower);
      follower.stop = liveSubscription(
        client,
        RunLogDocument,
        { org, id: runId, step, from: 0 },
        {
          next: ({ runLog }) => {
            if (runLog.nextOffset <= follower.offset) return;
            follower.offset = runLog.nextOffset;
            // The times index this piece's text; batched after what is pending, they shift by its length.
            const shift = follower.pending.length;
            for (const time of runLog.times) follower.pendingTimes.push({ index: time.index + shift, at: time.at });
            follower.pending += runLog.text;
            schedule();
          },
          resume: () => ({ org, id: runId, step, from: follower.offset }),
          state: (state) => {
            section.state = state;
            schedule();
          },
        },
      );
    }
  }, [client, org, runId, key]);

  // The same array until text or states change: searching 100,000 lines happens per change, not per render.
  const sections = useMemo(
    () =>
      (key ? key.split("\n") : [])
        .map((step) => followers.current.get(step)?.section)
        .filter((s): s is LogSection => Boolean(s)),
    [key, version],
  );
  const error = sections.find((s) => s.state.error)?.state.error ?? null;
  return { sections, version, error };
}
