import Anser from "anser";
import { memo, type CSSProperties, type ReactNode } from "react";

type Piece = { text: string; className?: string; style?: CSSProperties };

// The 256-colour palette beyond the 16 named colours: a 6×6×6 cube, then 24 greys.
function paletteColour(n: number): string {
  if (n >= 232) {
    const v = 8 + (n - 232) * 10;
    return `rgb(${v}, ${v}, ${v})`;
  }
  const i = n - 16;
  const level = (x: number) => (x === 0 ? 0 : 55 + x * 40);
  return `rgb(${level(Math.floor(i / 36))}, ${level(Math.floor(i / 6) % 6)}, ${level(i % 6)})`;
}

function colour(name: string | null, truecolor: string | null, kind: "fg" | "bg"): { className?: string; style?: CSSProperties } {
  if (!name) return {};
  const property = kind === "fg" ? "color" : "backgroundColor";
  if (name === "ansi-truecolor" && truecolor) return { style: { [property]: `rgb(${truecolor})` } };
  const palette = /^ansi-palette-(\d+)$/.exec(name);
  if (palette) {
    const n = Number(palette[1]);
    // The first 16 are the named colours: keep them on the theme's readable palette.
    return n < 16 ? { className: `${n < 8 ? "" : "ansi-bright-"}${NAMED[n % 8]}-${kind}`.replace(/^-/, "") } : { style: { [property]: paletteColour(n) } };
  }
  return { className: `${name}-${kind}` };
}
const NAMED = ["ansi-black", "ansi-red", "ansi-green", "ansi-yellow", "ansi-blue", "ansi-magenta", "ansi-cyan", "ansi-white"];

/** A line's text in coloured pieces, as the ANSI codes in it say (anser parses them). */
function pieces(line: string): Piece[] {
  if (!line.includes("\u001b")) return [{ text: line }];
  return Anser.ansiToJson(line, { use_classes: true, remove_empty: true }).map((entry) => {
    const fg = colour(entry.fg, entry.fg_truecolor, "fg");
    const bg = colour(entry.bg, entry.bg_truecolor, "bg");
    const classes = [fg.className, bg.className, ...entry.decorations.map((d) => `ansi-${d}`)].filter(Boolean);
    return { text: entry.content, className: classes.join(" ") || undefined, style: fg.style || bg.style ? { ...fg.style, ...bg.style } : undefined };
  });
}

/** The pieces again, with the characters in `marks` ([start, end, current]) wrapped in <mark>. */
function highlighted(parts: Piece[], marks: readonly [number, number, boolean][]): ReactNode[] {
  const out: ReactNode[] = [];
  let position = 0;
  let key = 0;
  for (const part of parts) {
    const end = position + part.text.length;
    let cursor = position;
    for (const [start, stop, current] of marks) {
      if (stop <= cursor || start >= end) continue;
      const from = Math.max(start, cursor);
      const to = Math.min(stop, end);
      if (from > cursor) out.push(<span key={key++} className={part.className} style={part.style}>{part.text.slice(cursor - position, from - position)}</span>);
      out.push(
        <mark key={key++} className={current ? "current" : undefined} data-current-match={current || undefined}>
          <span className={part.className} style={part.style}>
            {part.text.slice(from - position, to - position)}
          </span>
        </mark>,
      );
      cursor = to;
    }
    if (cursor < end) out.push(<span key={key++} className={part.className} style={part.style}>{part.text.slice(cursor - position)}</span>);
    position = end;
  }
  return out;
}

/** One line of the log: coloured, with the search's matches marked. */
export const LogLineText = memo(function LogLineText({ line, query, current }: { line: string; query: string; current: number | null }) {
  const parts = pieces(line);
  if (!query) return <>{parts.map((p, i) => (p.className || p.style ? <span key={i} className={p.className} style={p.style}>{p.text}</span> : p.text))}</>;
  const plain = parts.map((p) => p.text).join("").toLowerCase();
  const needle = query.toLowerCase();
  const marks: [number, number, boolean][] = [];
  for (let at = plain.indexOf(needle); at !== -1; at = plain.indexOf(needle, at + needle.length)) {
    marks.push([at, at + needle.length, at === current]);
  }
  return <>{highlighted(parts, marks)}</>;
});
