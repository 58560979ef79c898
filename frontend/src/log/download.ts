import { downloadFile } from "../download";

// The raw log (or one step's) as stored, byte for byte, from the REST route (GraphQL carries text in chunks).
export async function downloadRunLog(org: string, runId: string, token: string, fileName: string, step: string | null = null): Promise<void> {
  const query = step ? `?step=${encodeURIComponent(step)}` : "";
  const path = `/api/v1/orgs/${encodeURIComponent(org)}/runs/${encodeURIComponent(runId)}/logs${query}`;
  await downloadFile(path, token, fileName, "the log", (status) => `The server answered HTTP ${status} to the log's download.`);
}
