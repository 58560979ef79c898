import { useCallback, useState } from "react";

/** The log views' wrap preference, remembered by this browser (every log view shares it). */
const WRAP_KEY = "firstlume.log.wrap";

function read(key: string, fallback: boolean): boolean {
  try {
    const stored = window.localStorage.getItem(key);
    return stored === null ? fallback : stored === "true";
  } catch {
    return fallback; // storage disabled: the default, not remembered
  }
}

/** Whether log lines wrap (the default) or scroll sideways, and the way to change it. */
export function useLogWrap(): [boolean, (wrap: boolean) => void] {
  const [wrap, setWrap] = useState(() => read(WRAP_KEY, true));
  const change = useCallback((next: boolean) => {
    setWrap(next);
    try {
      window.localStorage.setItem(WRAP_KEY, String(next));
    } catch {
      // storage disabled: the choice lasts until the page is left
    }
  }, []);
  return [wrap, change];
}
