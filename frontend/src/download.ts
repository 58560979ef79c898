// A REST resource fetched with the token, then handed to the browser as a file, byte for byte
// (the log's and a state version's downloads).
import { authHeaders } from "./api/client";

export async function downloadFile(
  path: string,
  token: string,
  fileName: string,
  what: string,
  statusText: (status: number) => string = (status) => `The server answered HTTP ${status}.`,
): Promise<void> {
  let response: Response;
  try {
    response = await fetch(path, { credentials: "same-origin", headers: authHeaders(token) });
  } catch {
    throw new Error(`Can't reach the Firstlume server to download ${what}. Check that it is running and that you are online.`);
  }
  if (!response.ok) {
    let message = statusText(response.status);
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
