import { useVirtualizer } from "@tanstack/react-virtual";
import { useCallback, useDeferredValue, useEffect, useLayoutEffect, useMemo, useRef, useState, type KeyboardEvent } from "react";
import type { StepStatus } from "../graphql/generated";
import { duration, plural } from "../format";
import { StepStatusText } from "../components/ui";
import { downloadRunLog } from "./download";
import { findMatches, headingTitle, type Match } from "./lines";
import { LogLineText } from "./LogLine";
import { useRunLog, type LogSection } from "./useRunLog";
import { useLogWrap } from "./preferences";
import { applySummary } from "./summary";
import { useToken } from "../auth";

export type LogStep = { name: string; status: StepStatus; durationMs: number | null };

const LINE_HEIGHT = 20;
const HEADER_HEIGHT = 36;
const NOTE_HEIGHT = 30;
// Rows drawn beyond the visible ones, each side: enough to scroll smoothly, few enough for 100,000 lines.
const OVERSCAN = 50;
const MATCH_LIMIT = 10_000;

const pad = (n: number) => String(n).padStart(2, "0");
/** A line's time of day (the viewer's clock), as a terminal with timestamps would show it. */
function clock(ms: number): string {
  const d = new Date(ms);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

type Segment =
  | { kind: "header"; section: number; start: number }
  | { kind: "sub"; section: number; line: number; start: number }
  | { kind: "note"; section: number; start: number; text: string }
  | { kind: "lines"; section: number; from: number; to: number; start: number };

function segmentSize(segment: Segment): number {
  return segment.kind === "lines" ? segment.to - segment.from : 1;
}

function note(section: LogSection, status: StepStatus | undefined): string {
  if (status === "PENDING") return "This step has not started.";
  if (status === "SKIPPED") return "This step was skipped.";
  if (section.state.completed) return "This step wrote nothing.";
  return "No output yet.";
}

/** The rows to draw: section headers, apply-phase part headings, lines; collapsed parts left out. */
function layout(sections: LogSection[], steps: Map<string, LogStep>, collapsed: ReadonlySet<string>, headers: boolean): { segments: Segment[]; count: number } {
  const segments: Segment[] = [];
  let count = 0;
  const add = (segment: Segment) => {
    segments.push(segment);
    count += segmentSize(segment);
  };
  sections.forEach((section, s) => {
    if (headers) add({ kind: "header", section: s, start: count });
    if (headers && collapsed.has(section.step)) return;
    const log = section.log;
    if (log.count === 0) {
      add({ kind: "note", section: s, start: count, text: note(section, steps.get(section.step)?.status) });
      return;
    }
    const headings = log.headings;
    const first = headings.length ? headings[0] : log.count;
    if (first > 0) add({ kind: "lines", section: s, from: 0, to: first, start: count });
    headings.forEach((line, h) => {
      add({ kind: "sub", section: s, line, start: count });
      const end = h + 1 < headings.length ? headings[h + 1] : log.count;
      if (!collapsed.has(`${section.step}/${line}`) && end > line + 1) add({ kind: "lines", section: s, from: line + 1, to: end, start: count });
    });
  });
  return { segments, count };
}

function segmentAt(segments: Segment[], index: number): Segment {
  let low = 0;
  let high = segments.length - 1;
  while (low < high) {
    const mid = (low + high + 1) >> 1;
    if (segments[mid].start <= index) low = mid;
    else high = mid - 1;
  }
  return segments[low];
}

function rowOf(segments: Segment[], section: number, line: number): number | null {
  for (const segment of segments) {
    if (segment.section !== section) continue;
    if (segment.kind === "lines" && line >= segment.from && line < segment.to) return segment.start + line - segment.from;
    if (segment.kind === "sub" && segment.line === line) return segment.start;
  }
  return null;
}

/** The heading a line sits under (the apply phase's parts), as its collapse key. */
function partOf(section: LogSection, line: number): string | null {
  let found: number | null = null;
  for (const heading of section.log.headings) if (heading < line) found = heading;
  return found === null ? null : `${section.step}/${found}`;
}

/**
 * A run's log, one collapsible section per step (or one step's alone), live: ANSI colours,
 * search with match navigation, download of the raw log, and only the visible lines in the
 * document, so 100,000 lines scroll as smoothly as ten. Follows the end until the reader
 * scrolls up. Lines wrap by default (a toggle, remembered): a wrapped row's height is measured,
 * not assumed. Full screen on demand; a finished apply's summary and outputs stay pinned below.
 */
export function LogViewer({
  org,
  runId,
  steps,
  single = false,
  waiting,
  runFinished,
  height = "tall",
  downloadName,
}: {
  org: string;
  runId: string;
  /** The steps whose logs to show, in order. */
  steps: LogStep[];
  /** One step alone: no section headers. */
  single?: boolean;
  /** What to say while there is nothing to show. */
  waiting: string;
  runFinished: boolean;
  height?: "tall" | "short";
  /** The file name of the raw log's download (the step's alone when `single`); no download button without one. */
  downloadName?: string;
}) {
  const token = useToken();
  const started = steps.filter((s) => s.status !== "PENDING" && s.status !== "SKIPPED").map((s) => s.name);
  const { sections, version, error } = useRunLog(org, runId, started);
  const byName = useMemo(() => new Map(steps.map((s) => [s.name, s])), [steps]);
  const [collapsed, setCollapsed] = useState<ReadonlySet<string>>(new Set());
  const [following, setFollowing] = useState(true);
  const [search, setSearch] = useState("");
  const query = useDeferredValue(search);
  const [current, setCurrent] = useState(0);
  const [downloading, setDownloading] = useState<string | null>(null);
  const [wrap, setWrap] = useLogWrap();
  const [full, setFull] = useState(false);
  const box = useRef<HTMLDivElement>(null);
  const pendingScroll = useRef<Match | null>(null);

  // `version` changes whenever lines arrive; the layout is cheap (one entry per section and heading).
  const { segments, count } = useMemo(() => layout(sections, byName, collapsed, !single), [sections, byName, collapsed, single, version]);
  const lines = sections.reduce((n, s) => n + s.log.count, 0);
  const widest = sections.reduce((n, s) => Math.max(n, s.log.widest), 0);

  const { matches, capped } = useMemo(() => findMatches(sections.map((s) => s.log), query, MATCH_LIMIT), [sections, query, version]);
  const active = matches.length ? Math.min(current, matches.length - 1) : -1;

  const sizeOf = useRef<(index: number) => number>(() => LINE_HEIGHT);
  sizeOf.current = (index: number) => {
    const segment = segmentAt(segments, index);
    return segment.kind === "lines" ? LINE_HEIGHT : segment.kind === "note" ? NOTE_HEIGHT : HEADER_HEIGHT;
  };
  const estimateSize = useCallback((index: number) => sizeOf.current(index), []);
  const virtualizer = useVirtualizer({
    count,
    getScrollElement: () => box.current,
    estimateSize,
    overscan: OVERSCAN,
    paddingStart: 6,
    paddingEnd: 12,
  });
  // Collapsing moves every row after it, and wrapping changes every row's height: sizes by index are stale.
  const structure = segments.map((s) => `${s.kind}${s.start}`).join(",");
  useLayoutEffect(() => {
    virtualizer.measure();
  }, [virtualizer, structure, wrap, full]);

  // Measured (wrapped) rows change the total height after they are drawn: follow that too.
  const total = virtualizer.getTotalSize();
  // Where this view last scrolled itself to keep the end in sight (see onScroll).
  const pinnedAt = useRef(0);
  useLayoutEffect(() => {
    const el = box.current;
    if (following && el) pinnedAt.current = scrollToEnd(el);
  }, [following, version, count, total, full]);

  // The view itself changes size (full screen, the window, the apply summary pinned below it):
  // when following, its end stays in sight.
  const followingNow = useRef(following);
  followingNow.current = following;
  useEffect(() => {
    const el = box.current;
    if (!el || typeof ResizeObserver === "undefined") return;
    const observer = new ResizeObserver(() => {
      if (followingNow.current) pinnedAt.current = scrollToEnd(el);
    });
    observer.observe(el);
    return () => observer.disconnect();
  }, []);

  // Full screen ends with Escape, as a video's does.
  useEffect(() => {
    if (!full) return;
    const onKey = (event: globalThis.KeyboardEvent) => {
      if (event.key === "Escape") setFull(false);
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [full]);

  useLayoutEffect(() => {
    const target = pendingScroll.current;
    if (!target) return;
    const row = rowOf(segments, target.section, target.line);
    if (row !== null) {
      pendingScroll.current = null;
      virtualizer.scrollToIndex(row, { align: "center" });
    }
  }, [segments, virtualizer]);

  function onScroll() {
    const el = box.current;
    if (!el) return;
    const atEnd = el.scrollHeight - el.scrollTop - el.clientHeight < 32;
    // A scroll event of this view's own scrolling says nothing of the reader: the view may have
    // changed size since (the apply summary pinned below it appears as the run ends), leaving its
    // end out of sight until the resize is seen. Only the reader moving up stops following.
    if (!atEnd && following && el.scrollTop >= pinnedAt.current - 1) return;
    if (atEnd !== following) setFollowing(atEnd);
  }

  // A wrapped line can be taller than the view: centring its row may leave the match itself out
  // of sight. For a few frames after a move (the virtualizer settles measured rows meanwhile),
  // the current match is brought into the middle of the view when it is not in it.
  const revealMatch = useRef(0);
  useEffect(() => {
    if (revealMatch.current === 0) return;
    let frame = 0;
    const tick = () => {
      const el = box.current;
      const mark = el?.querySelector("mark.current");
      if (el && mark) {
        const m = mark.getBoundingClientRect();
        const b = el.getBoundingClientRect();
        if (m.top < b.top || m.bottom > b.bottom) el.scrollTop += m.top - b.top - (el.clientHeight - m.height) / 2;
      }
      if (--revealMatch.current > 0) frame = requestAnimationFrame(tick);
    };
    frame = requestAnimationFrame(tick);
    return () => cancelAnimationFrame(frame);
  });

  function goTo(index: number) {
    if (!matches.length) return;
    revealMatch.current = 12;
    const next = (index + matches.length) % matches.length;
    const match = matches[next];
    setCurrent(next);
    setFollowing(false);
    const section = sections[match.section];
    const part = partOf(section, match.line);
    if (collapsed.has(section.step) || (part && collapsed.has(part))) {
      const open = new Set(collapsed);
      open.delete(section.step);
      if (part) open.delete(part);
      setCollapsed(open);
    }
    pendingScroll.current = match;
    const row = rowOf(segments, match.section, match.line);
    if (row !== null && !collapsed.has(section.step) && !(part && collapsed.has(part))) {
      pendingScroll.current = null;
      virtualizer.scrollToIndex(row, { align: "center" });
    }
  }

  function onSearchKey(event: KeyboardEvent<HTMLInputElement>) {
    if (event.key === "Enter") {
      event.preventDefault();
      goTo(event.shiftKey ? active - 1 : active + 1);
    }
  }

  // Typing a search shows its first match, as a browser's find does.
  const shownQuery = useRef("");
  useEffect(() => {
    if (query === shownQuery.current) return;
    shownQuery.current = query;
    if (matches.length) goTo(0);
  }, [query, matches]);

  function toggle(key: string) {
    const next = new Set(collapsed);
    if (next.has(key)) next.delete(key);
    else next.add(key);
    setCollapsed(next);
  }

  async function download() {
    if (!downloadName) return;
    setDownloading("Preparing the download…");
    try {
      await downloadRunLog(org, runId, token, downloadName, single ? (steps[0]?.name ?? null) : null);
      setDownloading(null);
    } catch (caught) {
      setDownloading(caught instanceof Error ? caught.message : String(caught));
    }
  }

  const live = sections.some((s) => s.state.live);
  const allDone = sections.length > 0 && sections.every((s) => s.state.completed);
  const stateText = error
    ? error.message
    : live
      ? "live"
      : allDone && runFinished
        ? "end of log"
        : allDone
          ? "waiting for the next step"
          : sections.length === 0 && !runFinished
            ? "waiting"
            : "connecting…";
  const currentMatch = active >= 0 ? matches[active] : null;
  // Only once the run has ended: while it runs, the newest lines are the log's own end.
  const summary = useMemo(() => (runFinished ? applySummary(sections.map((s) => s.log)) : null), [runFinished, sections, version]);

  return (
    <div className={`log-view ${height}${wrap ? " wrap" : ""}${full ? " full" : ""}`} role={full ? "dialog" : undefined} aria-label={full ? "Log, full screen" : undefined}>
      <div className="log-bar">
        <span className="log-status">
          <span className={`live-dot ${live ? "on" : ""}`} aria-hidden="true" />
          <span className="small" data-testid="log-state">
            {stateText}
          </span>
          <span className="small log-count">{plural(lines, "line")}</span>
        </span>
        <span className="log-search" role="search">
          <input
            type="search"
            placeholder="Search the log"
            aria-label="Search the log"
            value={search}
            onChange={(e) => {
              setSearch(e.target.value);
              setCurrent(0);
            }}
            onKeyDown={onSearchKey}
          />
          {query && (
            <span className="small match-count" role="status" data-testid="match-count">
              {matches.length ? `${active + 1} of ${matches.length.toLocaleString()}${capped ? "+" : ""}` : "no match"}
            </span>
          )}
          <button type="button" className="btn small icon" onClick={() => goTo(active - 1)} disabled={!matches.length} aria-label="Previous match" title="Previous match (Shift+Enter)">
            ↑
          </button>
          <button type="button" className="btn small icon" onClick={() => goTo(active + 1)} disabled={!matches.length} aria-label="Next match" title="Next match (Enter)">
            ↓
          </button>
        </span>
        <span className="log-actions">
          {!following && (
            <button className="btn small" onClick={() => setFollowing(true)}>
              ↓ Follow the end
            </button>
          )}
          <button type="button" className="btn small" aria-pressed={wrap} onClick={() => setWrap(!wrap)} title="Wrap long lines, or scroll sideways">
            Wrap lines
          </button>
          <button type="button" className="btn small" aria-pressed={full} onClick={() => setFull(!full)} title={full ? "Leave full screen (Escape)" : "Show the log on the whole screen"}>
            {full ? "Exit full screen" : "Full screen"}
          </button>
          {downloadName && (
            <button className="btn small" onClick={() => void download()} disabled={downloading === "Preparing the download…"}>
              Download raw log
            </button>
          )}
        </span>
      </div>
      {downloading && downloading !== "Preparing the download…" && (
        <div className="log-alert" role="alert">
          {downloading}
        </div>
      )}
      <div className="log" ref={box} onScroll={onScroll} data-testid="log" tabIndex={0} role="log" aria-label={single ? `Log of ${steps[0]?.name ?? "the step"}` : "Run log"}>
        {count === 0 ? (
          <div className="log-empty">{runFinished && sections.every((s) => s.state.completed) ? "This log is empty." : waiting}</div>
        ) : (
          <div className="log-rows" style={{ height: total, minWidth: wrap ? undefined : `calc(${widest}ch + 5.5em + 10ch)` }}>
            {virtualizer.getVirtualItems().map((item) => {
              const segment = segmentAt(segments, item.index);
              const section = sections[segment.section];
              // Wrapped rows take the height their text needs, and the virtualizer measures it.
              const style = wrap ? { transform: `translateY(${item.start}px)` } : { transform: `translateY(${item.start}px)`, height: item.size };
              const measured = { "data-index": item.index, ref: wrap ? virtualizer.measureElement : undefined };
              if (segment.kind === "header") {
                const step = byName.get(section.step);
                const open = !collapsed.has(section.step);
                return (
                  <div key={item.key} {...measured} className="log-row log-section-head" style={style} data-log-section={section.step}>
                    <button type="button" aria-expanded={open} onClick={() => toggle(section.step)}>
                      <span aria-hidden="true">{open ? "▾" : "▸"}</span> {section.step}
                    </button>
                    {step && <StepStatusText status={step.status} />}
                    {step?.durationMs !== null && step?.durationMs !== undefined && <span className="small dim">{duration(step.durationMs)}</span>}
                  </div>
                );
              }
              if (segment.kind === "note") {
                return (
                  <div key={item.key} {...measured} className="log-row log-note" style={style}>
                    {segment.text}
                  </div>
                );
              }
              if (segment.kind === "sub") {
                const key = `${section.step}/${segment.line}`;
                const open = !collapsed.has(key);
                return (
                  <div key={item.key} {...measured} className="log-row log-part-head" style={style}>
                    <button type="button" aria-expanded={open} onClick={() => toggle(key)}>
                      <span aria-hidden="true">{open ? "▾" : "▸"}</span> {headingTitle(section.log.line(segment.line))}
                    </button>
                  </div>
                );
              }
              const line = segment.from + item.index - segment.start;
              const isCurrent = currentMatch && currentMatch.section === segment.section && currentMatch.line === line ? currentMatch.start : null;
              const time = section.log.time(line);
              return (
                <div key={item.key} {...measured} className="log-row log-line" style={style} data-line={line + 1}>
                  <span className="ln" aria-hidden="true">
                    {line + 1}
                  </span>
                  {time === null ? (
                    <span className="ts" aria-hidden="true" />
                  ) : (
                    <time className="ts" dateTime={new Date(time).toISOString()} title={new Date(time).toLocaleString()}>
                      {clock(time)}
                    </time>
                  )}
                  <span className="lt">
                    <LogLineText line={section.log.line(line)} query={query} current={isCurrent} />
                  </span>
                </div>
              );
            })}
          </div>
        )}
      </div>
      {summary && (
        <div className="log-summary" data-testid="apply-summary" aria-label="Apply summary" role="region">
          <strong>{summary.complete}</strong>
          {summary.outputs.length > 0 && (
            <dl className="log-outputs">
              <dt>Outputs</dt>
              {summary.outputs.map((line, i) => (
                <dd key={i}>{line.trim()}</dd>
              ))}
            </dl>
          )}
        </div>
      )}
    </div>
  );
}

/** Scrolls `el` to its end; where it stopped (the browser keeps scrollTop within its range). */
function scrollToEnd(el: HTMLElement): number {
  el.scrollTop = el.scrollHeight;
  return el.scrollTop;
}
