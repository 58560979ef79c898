import { memo, useCallback, useEffect, useLayoutEffect, useRef, useState } from "react";
import { useSubscription } from "../api/hooks";
import { RunLogDocument } from "../graphql/generated";

// Text arrives in chunks of any size; it is kept as blocks of whole lines. Only the last block
// changes as text arrives, so a long log is never re-rendered whole (memoized blocks), and
// updates are batched to one per animation frame however fast the chunks come.
const LINES_PER_BLOCK = 200;
const ANSI = /\u001b\[[0-9;]*[A-Za-z]/g;

type Blocks = { done: string[]; tail: string; tailLines: number; lines: number };
const EMPTY: Blocks = { done: [], tail: "", tailLines: 0, lines: 0 };

function append(blocks: Blocks, text: string): Blocks {
  let { tail, tailLines, lines } = blocks;
  const done = blocks.done.slice();
  const parts = text.replace(ANSI, "").split("\n");
  parts.forEach((part, i) => {
    tail += part;
    if (i < parts.length - 1) {
      tail += "\n";
      tailLines += 1;
      lines += 1;
      if (tailLines >= LINES_PER_BLOCK) {
        done.push(tail);
        tail = "";
        tailLines = 0;
      }
    }
  });
  return { done, tail, tailLines, lines };
}

const Block = memo(function Block({ text }: { text: string }) {
  return <span className="log-block">{text}</span>;
});

export function LogView({
  org,
  runId,
  step = null,
  waiting,
  height = "tall",
}: {
  org: string;
  runId: string;
  step?: string | null;
  /** What to say while the log is empty. */
  waiting: string;
  height?: "tall" | "short";
}) {
  const [blocks, setBlocks] = useState<Blocks>(EMPTY);
  const [following, setFollowing] = useState(true);
  const pending = useRef("");
  const frame = useRef<number | null>(null);
  const offset = useRef(0);
  const box = useRef<HTMLDivElement>(null);

  const flush = useCallback(() => {
    frame.current = null;
    const text = pending.current;
    pending.current = "";
    if (text) setBlocks((b) => append(b, text));
  }, []);

  // A new run or step starts from the beginning.
  useEffect(() => {
    setBlocks(EMPTY);
    offset.current = 0;
    pending.current = "";
    setFollowing(true);
  }, [runId, step]);

  useEffect(() => () => {
    if (frame.current !== null) cancelAnimationFrame(frame.current);
  }, []);

  const { live, completed, error } = useSubscription(
    RunLogDocument,
    { org, id: runId, step, from: 0 },
    {
      next: ({ runLog }) => {
        if (runLog.nextOffset <= offset.current) return;
        offset.current = runLog.nextOffset;
        pending.current += runLog.text;
        if (frame.current === null) frame.current = requestAnimationFrame(flush);
      },
      // After a broken connection, continue where the last chunk ended: nothing missed or doubled.
      resume: () => ({ org, id: runId, step, from: offset.current }),
    },
  );

  useLayoutEffect(() => {
    if (following && box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [blocks, following]);

  function onScroll() {
    const el = box.current;
    if (!el) return;
    const atEnd = el.scrollHeight - el.scrollTop - el.clientHeight < 32;
    if (atEnd !== following) setFollowing(atEnd);
  }

  const empty = blocks.lines === 0 && blocks.tail === "";
  return (
    <div className={`log-view ${height}`}>
      <div className="log-bar">
        <span className={`live-dot ${live ? "on" : ""}`} />
        <span className="small muted" data-testid="log-state">
          {error ? error.message : live ? "live" : completed ? "end of log" : "connecting…"}
        </span>
        <span className="small muted">{blocks.lines.toLocaleString()} lines</span>
        <span className="spacer" />
        {!following && (
          <button
            className="btn small"
            onClick={() => {
              setFollowing(true);
            }}
          >
            ↓ Follow the end
          </button>
        )}
      </div>
      <div className="log" ref={box} onScroll={onScroll} data-testid="log" tabIndex={0}>
        {empty ? (
          <div className="log-empty">{completed ? "This log is empty." : waiting}</div>
        ) : (
          <pre>
            {blocks.done.map((text, i) => (
              <Block key={i} text={text} />
            ))}
            <Block text={blocks.tail} />
          </pre>
        )}
      </div>
    </div>
  );
}
