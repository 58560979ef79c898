import { Fragment } from "react";

// Where a resource address may break: after the dots of `module.x.aws_y.z` and before an index
// (`["eu-west-1"]`, `[0]`), so a line ends between names, never inside one.
const SEPARATOR = /(?<=\.)|(?=\[)/;

/** A resource address that wraps at its separators, not mid-word (`.address` keeps words whole). */
export function Address({ address, className = "" }: { address: string; className?: string }) {
  const parts = address.split(SEPARATOR);
  return (
    <span className={`mono address ${className}`.trim()}>
      {parts.map((part, i) => (
        <Fragment key={i}>
          {i > 0 && <wbr />}
          {part}
        </Fragment>
      ))}
    </span>
  );
}
