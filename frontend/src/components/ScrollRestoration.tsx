import { useEffect, useLayoutEffect, useRef } from "react";
import { useLocation, useNavigationType } from "react-router";

// A page's content arrives after the navigation (its chunk, then its queries): the saved place is
// tried again each frame as the page grows, for this long, then taken as far as it goes.
const RESTORE_FOR_MS = 5000;
const key = (entry: string) => `scroll:${entry}`;

/**
 * Back and Forward return to the place in the page (a 200-resource review where it was left);
 * a new page starts at its top, unless its address names an anchor. The window is the page's
 * one scroll container, so the place is window.scrollY, kept per history entry for the tab's
 * life (sessionStorage, as the browser keeps its own).
 */
export function useScrollRestoration(): void {
  const location = useLocation();
  const navigation = useNavigationType();

  // The entry the window's place belongs to: it changes in the layout effect below, before that
  // effect moves the window for the new entry, so the move is never saved as the old one's place.
  const entry = useRef(location.key);

  useEffect(() => {
    if ("scrollRestoration" in history) history.scrollRestoration = "manual";
    const save = () => {
      try {
        sessionStorage.setItem(key(entry.current), String(Math.round(window.scrollY)));
      } catch {
        // Storage full or refused: Back then starts at the top, as without this.
      }
    };
    window.addEventListener("scroll", save, { passive: true });
    return () => window.removeEventListener("scroll", save);
  }, []);

  useLayoutEffect(() => {
    const previous = entry.current;
    entry.current = location.key;
    // The filters replaced the entry: the place goes with it.
    if (navigation === "REPLACE") {
      const place = sessionStorage.getItem(key(previous));
      if (place !== null) sessionStorage.setItem(key(location.key), place);
      return;
    }
    if (navigation === "PUSH") {
      if (!location.hash) window.scrollTo(0, 0);
      return;
    }
    const saved = Number(sessionStorage.getItem(key(location.key)));
    if (!saved) {
      window.scrollTo(0, 0);
      return;
    }
    const until = performance.now() + RESTORE_FOR_MS;
    let frame = 0;
    let moved = false;
    // A person who scrolls meanwhile has chosen their place: stop.
    const stop = () => {
      moved = true;
    };
    window.addEventListener("wheel", stop, { passive: true, once: true });
    window.addEventListener("touchmove", stop, { passive: true, once: true });
    window.addEventListener("keydown", stop, { once: true });
    const attempt = () => {
      if (moved) return;
      const room = document.documentElement.scrollHeight - window.innerHeight;
      if (room >= saved || performance.now() > until) {
        window.scrollTo(0, saved);
        return;
      }
      frame = requestAnimationFrame(attempt);
    };
    attempt();
    return () => {
      cancelAnimationFrame(frame);
      window.removeEventListener("wheel", stop);
      window.removeEventListener("touchmove", stop);
      window.removeEventListener("keydown", stop);
    };
  }, [location.key]);
}
