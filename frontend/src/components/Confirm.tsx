import { useId, useState, type ComponentProps, type ReactNode } from "react";
import { ErrorBox } from "./ui";

/** "Delete …" (or Revoke, Remove) behind a second step: the question (what goes, what is kept),
 * Keep it or the action, and why the server refused. With `name`, an undo-free action also asks
 * for its name to be typed, so a slip of the mouse cannot destroy anything. One component for
 * every such action, so all of them ask the same way. */
export function ConfirmDelete(props: {
  what: string;
  question: ReactNode;
  busy: boolean;
  error: ComponentProps<typeof ErrorBox>["error"];
  onDelete: () => void;
  onKeep?: () => void;
  /** Type this to confirm (the stack's slug, the token's name); none: a second click is enough. */
  name?: string;
  verb?: string;
  /** A short label for the first button, inside a table row (defaults to "Delete <what>…"). */
  label?: string;
  /** The first button's accessible name when its label alone is ambiguous in a table ("Revoke ci"). */
  ariaLabel?: string;
  small?: boolean;
}) {
  const [confirming, setConfirming] = useState(false);
  const [typed, setTyped] = useState("");
  const verb = props.verb ?? "Delete";
  const inputId = useId();
  const matches = props.name === undefined || typed.trim() === props.name;
  const size = props.small ? " small" : "";
  const keep = () => {
    setConfirming(false);
    setTyped("");
    props.onKeep?.();
  };
  return (
    <>
      <div className={props.small ? "confirm-inline" : "form-row"}>
        {confirming ? (
          <div className="alert alert-danger confirm grow" role="alertdialog" aria-label={`${verb} ${props.what}`} data-testid="confirm-delete">
            <div>
              {props.question}
              {props.name !== undefined && (
                <label className="type-to-confirm" htmlFor={inputId}>
                  Type <strong className="mono">{props.name}</strong> to confirm
                  <input id={inputId} autoComplete="off" autoFocus value={typed} onChange={(e) => setTyped(e.target.value)} />
                </label>
              )}
            </div>
            <div className="actions">
              <button type="button" className={`btn${size}`} onClick={keep}>
                Keep it
              </button>
              <button type="button" className={`btn danger${size}`} disabled={props.busy || !matches} onClick={props.onDelete}>
                {verb} the {props.what}
              </button>
            </div>
          </div>
        ) : (
          <button type="button" className={`btn danger-outline${size}`} onClick={() => setConfirming(true)} aria-label={props.ariaLabel}>
            {props.label ?? `${verb} ${props.what}…`}
          </button>
        )}
      </div>
      <ErrorBox error={props.error} title={`The ${props.what} was not ${verb === "Delete" ? "deleted" : verb === "Revoke" ? "revoked" : "removed"}.`} />
    </>
  );
}

/** The question before a change that reaches more than the page shows ("applies to 14 stacks
 * under prod/"): Save or Back. */
export function ConfirmChange({ question, busy, onSave, onBack }: { question: ReactNode; busy: boolean; onSave: () => void; onBack: () => void }) {
  return (
    <div className="alert alert-warning confirm" role="alertdialog" aria-label="Confirm the change" data-testid="confirm-change">
      <div>{question}</div>
      <div className="actions">
        <button type="button" className="btn" onClick={onBack}>
          Back
        </button>
        <button type="button" className="btn primary" disabled={busy} onClick={onSave} autoFocus>
          Save
        </button>
      </div>
    </div>
  );
}

/** "Saved", after a save the server accepted (announced to screen readers). */
export function Saved({ show }: { show: boolean }) {
  return (
    <span className="saved" role="status" data-testid="saved">
      {show ? "✓ Saved" : ""}
    </span>
  );
}
