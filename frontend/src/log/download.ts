// The raw log (or one step's) as stored, byte for byte, from the REST route (GraphQL carries text in chunks):
// fetched with the token, then handed to the browser as a file.
export async function downloadRunLog(org: string, runId: string, token: string, fileName: string, step: string | null = null): Promise<void> {
  const query = step ? `?step=${encodeURIComponent(step)}` : "";
  let response: Response;
  try {
    response = await fetch(`/api/v1/orgs/${encodeURIComponent(org)}/runs/${encodeURIComponent(runId)}/logs${query}`, {
      headers: { authorization: `Bearer ${token}` },
    });
  } catch {
    throw new Error("Can't reach the Firstlume server to download the log. Check that it is running and that you are online.");
  }
  if (!response.ok) {
    let message = `The server answered HTTP ${response.status} to the log's download.`;
    try {
      const body = (await response.json()) as { error?: { message?: string } };
      if (body.error?.message) message = body.error.message;
    } catch {
      // Not the documented error shape: the status says enough.
    }
    throw new Error(message);
  }
  const url = URL.createObjectURL(await response.blob());
  try {
    const link = document.createElement("a");
    link.href = url;
    link.download = fileName;
    document.body.append(link);
    link.click();
    link.remove();
  } finally {
    // The browser has taken the file once the click is handled.
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  }
}
