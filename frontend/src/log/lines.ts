// A log as lines, appended to in place as text arrives in chunks of any size (a chunk may end in
// the middle of a line). Kept mutable on purpose: a 100,000-line log is never copied per chunk;
// a version number tells React when to render again. Pure: no React, no I/O.

// SGR and other CSI sequences (colours, erase-line); what a search sees is the text without them.
const ANSI = /\u001b\[[0-9;?]*[ -/]*[@-~]/g;
const HEADING = /^--- (\S.*)$/;

export function stripAnsi(line: string): string {
  return line.includes("\u001b") ? line.replace(ANSI, "") : line;
}

/** Where a piece of appended text starts (index in that text) and when the server received it. */
export type TextTime = { index: number; at: string | null };

export class LogLines {
  /** Whole lines, as received (with their ANSI codes). */
  readonly lines: string[] = [];
  /** When each line's first character reached the server (ms since the epoch; null if unknown). */
  readonly times: (number | null)[] = [];
  /** The last line while it has no newline yet. */
  partial = "";
  /** When the partial line's first character arrived. */
  private partialTime: number | null = null;
  /** The time of the text appended last: text with no time of its own continues it. */
  private lastTime: number | null = null;
  /** Indices of heading lines ("--- init"): the apply phase's parts. */
  readonly headings: number[] = [];
  /** The longest line, in characters without ANSI codes: the width the view needs. */
  widest = 0;

  get count(): number {
    return this.lines.length + (this.partial ? 1 : 0);
  }

  line(index: number): string {
    return index < this.lines.length ? this.lines[index] : this.partial;
  }

  time(index: number): number | null {
    return index < this.lines.length ? this.times[index] : this.partialTime;
  }

  /** Appends `text`; `times` (by index into `text`, in order) say when its pieces arrived. */
  append(text: string, times: readonly TextTime[] = []): void {
    if (!text) return;
    let next = 0;
    const timeAt = (index: number): number | null => {
      while (next < times.length && times[next].index <= index) {
        const at = times[next++].at;
        this.lastTime = at === null ? null : Date.parse(at);
      }
      return this.lastTime;
    };
    let start = 0;
    let newline = text.indexOf("\n");
    while (newline !== -1) {
      const time = this.partial ? this.partialTime : timeAt(start);
      this.push(this.partial + text.slice(start, newline), time);
      this.partial = "";
      this.partialTime = null;
      start = newline + 1;
      newline = text.indexOf("\n", start);
    }
    if (start < text.length) {
      if (!this.partial) this.partialTime = timeAt(start);
      this.partial += text.slice(start);
    }
    timeAt(text.length);
    this.measure(this.partial);
  }

  private push(raw: string, time: number | null): void {
    // A carriage return redraws the line: what a terminal would show is what follows the last one.
    const line = raw.includes("\r") ? raw.slice(raw.lastIndexOf("\r", raw.length - 2) + 1).replace(/\r$/, "") : raw;
    if (line.startsWith("--- ") && HEADING.test(line)) this.headings.push(this.lines.length);
    this.lines.push(line);
    this.times.push(time);
    this.measure(line);
  }

  private measure(line: string): void {
    const width = line.includes("\u001b") ? stripAnsi(line).length : line.length;
    if (width > this.widest) this.widest = width;
  }
}

export function headingTitle(line: string): string {
  return HEADING.exec(stripAnsi(line))?.[1] ?? line;
}

export type Match = { section: number; line: number; start: number };

/** Every case-insensitive occurrence of `query`, in order; stops after `limit`. */
export function findMatches(sections: readonly LogLines[], query: string, limit: number): { matches: Match[]; capped: boolean } {
  const matches: Match[] = [];
  const needle = query.toLowerCase();
  if (!needle) return { matches, capped: false };
  for (let s = 0; s < sections.length; s++) {
    const log = sections[s];
    for (let i = 0; i < log.count; i++) {
      const text = stripAnsi(log.line(i)).toLowerCase();
      let at = text.indexOf(needle);
      while (at !== -1) {
        if (matches.length >= limit) return { matches, capped: true };
        matches.push({ section: s, line: i, start: at });
        at = text.indexOf(needle, at + needle.length);
      }
    }
  }
  return { matches, capped: false };
}
