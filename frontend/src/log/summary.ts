// The apply's summary, as Terraform prints it at the end of an apply: "Apply complete! Resources:
// …" and the outputs after it. Read from the log's end only (a summary is the last thing an apply
// writes), so a 100,000-line log costs a few hundred lines. Pure: no React, no I/O.
import { stripAnsi, type LogLines } from "./lines";

export type ApplySummary = { complete: string; outputs: string[] };

const COMPLETE = /^(Apply complete!|Destroy complete!)/;
// How far from a log's end the summary is looked for: outputs can be many lines long.
const TAIL = 400;

export function applySummary(logs: readonly LogLines[]): ApplySummary | null {
  for (let s = logs.length - 1; s >= 0; s--) {
    const log = logs[s];
    const from = Math.max(0, log.count - TAIL);
    for (let i = log.count - 1; i >= from; i--) {
      const text = stripAnsi(log.line(i)).trim();
      if (!COMPLETE.test(text)) continue;
      const outputs: string[] = [];
      let inOutputs = false;
      for (let j = i + 1; j < log.count; j++) {
        const line = stripAnsi(log.line(j));
        if (line.trim() === "Outputs:") inOutputs = true;
        else if (inOutputs && line.trim()) outputs.push(line.trimEnd());
      }
      return { complete: text, outputs };
    }
  }
  return null;
}
